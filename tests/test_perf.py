"""Properties of the performance model (sizing/perf/load.py) over many configurations."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.catalog.calibration import CALIBRATION_FILE, load_calibration
from sizing.catalog.lookup import load_catalog
from sizing.errors import PerfModelError
from sizing.perf.goodput import goodput
from sizing.perf.load import WorkloadShape, estimate_closed_loop, estimate_offline, estimate_open_loop
from sizing.perf.memory import memory_fit
from sizing.perf.replica import ReplicaConfig
from sizing.perf.step import build_step_model, compute_peak_tflops

CAT = load_catalog()
MODELS = ["llama-3.1-8b-instruct", "llama-3.1-70b-instruct", "mixtral-8x7b-instruct", "qwen3-8b",
          "llama-3.2-1b-instruct", "qwen3-30b-a3b"]
GPUS = ["L4", "A10G", "L40S", "A100-80GB", "H100-SXM", "H200"]
PRECISIONS = ["fp16", "bf16", "fp8", "int4-awq", "int4-gptq"]
ENGINES = ["vllm", "sglang", "tensorrt-llm"]

configs = st.builds(
    lambda m, g, p, tp, e, kv: ReplicaConfig(model=CAT.model(m), gpu=g, precision=p, tp=tp, engine=e,
                                             kv_cache_dtype=kv),
    st.sampled_from(MODELS), st.sampled_from(GPUS), st.sampled_from(PRECISIONS), st.sampled_from([1, 2, 4, 8]),
    st.sampled_from(ENGINES), st.sampled_from(["auto", "fp8"]))
shapes = st.builds(WorkloadShape, st.sampled_from([64.0, 256.0, 1024.0, 4096.0]),
                   st.sampled_from([16.0, 128.0, 512.0, 2048.0]))


def _step(cfg: ReplicaConfig):  # type: ignore[no-untyped-def]
    link = "nvlink" if CAT.gpu(cfg.gpu).nvlink_bandwidth_gbs else "pcie"
    return build_step_model(CAT, load_calibration(), cfg.model, cfg.gpu, cfg.precision, cfg.tp, cfg.pp,
                            cfg.kv_cache_dtype, cfg.engine, link)


@settings(max_examples=150, deadline=None)
@given(configs, shapes, st.integers(min_value=1, max_value=512))
def test_throughput_never_exceeds_the_roofline(cfg: ReplicaConfig, shape: WorkloadShape, n: int) -> None:
    e = estimate_closed_loop(CAT, cfg, shape, n)
    if e.max_concurrent_sequences < 1:
        return
    sm = _step(cfg)
    gpu = CAT.gpu(cfg.gpu)
    batch = min(n, e.max_concurrent_sequences)
    # memory roofline: every step reads at least the dense weights of each GPU at peak bandwidth
    step_floor_s = sm.pp * sm.weight_bytes_touched(1.0) / (gpu.memory_bandwidth_gbs * 1e9)
    assert e.output_tokens_per_s <= batch / step_floor_s * (1 + 1e-9)
    # compute roofline: 2 FLOPs per active weight per generated token, at datasheet peak over tp·pp GPUs
    peak, _ = compute_peak_tflops(load_calibration(), gpu, CAT.precision(cfg.precision))
    assert e.output_tokens_per_s * sm.flops_per_token_per_gpu <= peak * 1e12 * (1 + 1e-9)
    assert e.itl_p95_ms >= e.itl_ms > 0 and e.ttft_p95_ms >= e.ttft_ms > 0


@settings(max_examples=100, deadline=None)
@given(configs, shapes)
def test_itl_rises_with_batch(cfg: ReplicaConfig, shape: WorkloadShape) -> None:
    cap = estimate_offline(CAT, cfg, shape).max_concurrent_sequences
    prev = 0.0
    for n in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        if n > cap:
            break
        itl = estimate_closed_loop(CAT, cfg, shape, n).itl_ms
        assert itl >= prev * (1 - 1e-9)
        prev = itl


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(GPUS), st.sampled_from(PRECISIONS), st.sampled_from([1, 2]))
def test_more_tp_never_raises_memory_per_gpu(model: str, gpu: str, precision: str, pp: int) -> None:
    prev_w = prev_kv = float("inf")
    for tp in (1, 2, 4, 8):
        cfg = ReplicaConfig(model=CAT.model(model), gpu=gpu, precision=precision, tp=tp, pp=pp)
        fit = memory_fit(CAT, cfg, 2048)
        sm = _step(cfg)
        assert fit.weights_gib_per_gpu <= prev_w + 1e-9 and sm.weight_gib_per_gpu <= prev_w + 1e-9
        assert sm.kv_bytes_per_token_per_gpu <= prev_kv + 1e-9
        prev_w, prev_kv = fit.weights_gib_per_gpu, sm.kv_bytes_per_token_per_gpu


@settings(max_examples=80, deadline=None)
@given(configs, shapes, st.sampled_from([200.0, 500.0, 1000.0, 3000.0]), st.sampled_from([15.0, 25.0, 50.0]),
       st.sampled_from([1.0, 1.5, 3.0]))
def test_goodput_is_monotone_in_the_slo(cfg: ReplicaConfig, shape: WorkloadShape, ttft: float, itl: float,
                                        looser: float) -> None:
    tight = goodput(CAT, cfg, shape, ttft, itl)
    loose = goodput(CAT, cfg, shape, ttft * looser, itl * looser)
    assert loose.output_tokens_per_s >= tight.output_tokens_per_s * (1 - 1e-9)
    assert loose.feasible or not tight.feasible


def test_reference_scenario_l4_fp16_is_infeasible_and_says_why() -> None:
    cfg = ReplicaConfig(model=CAT.model("meta-llama/Meta-Llama-3-8B-Instruct"), gpu="L4", precision="fp16")
    g = goodput(CAT, cfg, WorkloadShape(1024, 512), 1000.0, 25.0)
    assert not g.feasible and g.output_tokens_per_s == 0.0
    assert g.reason_code == "misses-itl" and "decode-step floor" in g.reason and "300 GB/s" in g.reason


def test_reference_scenario_h100_fp8_is_feasible() -> None:
    cfg = ReplicaConfig(model=CAT.model("meta-llama/Meta-Llama-3-8B-Instruct"), gpu="H100-SXM", precision="fp8")
    g = goodput(CAT, cfg, WorkloadShape(1024, 512), 1000.0, 25.0)
    assert g.feasible and g.at is not None and g.at.itl_p95_ms <= 25.0 and g.at.ttft_p95_ms <= 1000.0


def test_does_not_fit_is_reported() -> None:
    cfg = ReplicaConfig(model=CAT.model("llama-3.1-70b-instruct"), gpu="L4", precision="fp16")
    g = goodput(CAT, cfg, WorkloadShape(1024, 512), 1000.0, 25.0)
    assert not g.feasible and g.reason_code == "does-not-fit"


def test_open_loop_little_law_and_instability() -> None:
    cfg = ReplicaConfig(model=CAT.model("llama-3.1-8b-instruct"), gpu="A100-80GB", precision="bf16")
    shape = WorkloadShape(512, 256)
    e = estimate_open_loop(CAT, cfg, shape, 2.0)
    assert e.stable and e.concurrency == pytest.approx(2.0 * e.e2e_latency_ms / 1e3, rel=0.02)
    top = estimate_offline(CAT, cfg, shape)
    assert not estimate_open_loop(CAT, cfg, shape, top.requests_per_s * 3).stable


def test_closed_loop_beyond_the_batch_limit_queues() -> None:
    cfg = ReplicaConfig(model=CAT.model("llama-3.1-8b-instruct"), gpu="L4", precision="fp8", max_num_seqs=8)
    shape = WorkloadShape(512, 256)
    at_cap, over = estimate_closed_loop(CAT, cfg, shape, 8), estimate_closed_loop(CAT, cfg, shape, 32)
    assert over.output_tokens_per_s == pytest.approx(at_cap.output_tokens_per_s, rel=1e-6)
    assert over.ttft_ms > at_cap.ttft_ms and over.bound in ("engine-limit", "compute")


def test_fp8_is_weight_only_on_ampere_and_native_on_hopper() -> None:
    cal, fp8 = load_calibration(), CAT.precision("fp8")
    assert compute_peak_tflops(cal, CAT.gpu("A100-80GB"), fp8) == (312.0, True)
    peak, weight_only = compute_peak_tflops(cal, CAT.gpu("H100-SXM"), fp8)
    assert peak == CAT.gpu("H100-SXM").fp8_dense_tflops and not weight_only


def test_a10g_uses_the_fitted_compute_figure_and_a_missing_one_raises() -> None:
    cal = load_calibration()
    peak, _ = compute_peak_tflops(cal, CAT.gpu("A10G"), CAT.precision("fp16"))
    assert peak == cal.fitted_compute_tflops["A10G"]
    with pytest.raises(PerfModelError, match="will not guess"):
        compute_peak_tflops(replace(cal, fitted_compute_tflops={}), CAT.gpu("A10G"), CAT.precision("fp16"))


def test_moe_reads_fewer_weight_bytes_at_small_batch() -> None:
    sm = _step(ReplicaConfig(model=CAT.model("mixtral-8x7b-instruct"), gpu="H100-SXM", precision="fp8", tp=2))
    assert sm.weight_bytes_touched(1) < sm.weight_bytes_touched(64) <= sm.dense_bytes_per_gpu + 8 * \
        sm.expert_bytes_per_gpu * (1 + 1e-9)


def test_prefix_cache_hits_cut_ttft() -> None:
    cfg = ReplicaConfig(model=CAT.model("llama-3.1-8b-instruct"), gpu="L40S", precision="fp8")
    cold = estimate_closed_loop(CAT, cfg, WorkloadShape(4096, 256), 4)
    warm = estimate_closed_loop(CAT, cfg, WorkloadShape(4096, 256, prefix_cache_hit_rate=0.8), 4)
    assert warm.ttft_ms < cold.ttft_ms


def test_calibration_file_says_what_it_is() -> None:
    doc = json.loads(CALIBRATION_FILE.read_text())
    assert doc["fitted_on"] and all(f in doc["source_file"] for f in (
        "perf_points.csv", "perf_points_2026.csv", "perf_points_2026_ext.csv"))
    assert set(doc["fit_error"]["overall"]) >= {"throughput", "ttft", "itl"}


def test_perf_modules_stay_light() -> None:
    import subprocess
    import sys

    code = ("import sys, sizing.perf.load; "
            "bad = [m for m in ('numpy', 'pulumi', 'boto3', 'scipy') if m in sys.modules]; print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
