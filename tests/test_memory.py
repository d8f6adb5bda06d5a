"""Memory sizing: the source material's figures, and physical invariants."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sizing.catalog.lookup import load_catalog
from sizing.cli import app
from sizing.perf.memory import GIB, kv_cache_bytes_per_sequence, kv_cache_bytes_per_token, memory_fit
from sizing.perf.replica import ReplicaConfig

runner = CliRunner()
CAT = load_catalog()


def test_llama70b_kv_and_weights_from_the_cli() -> None:
    r = runner.invoke(app, ["estimate", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-SXM",
                            "--tp", "4", "--precision", "bf16", "--prompt-tokens", "8192", "--output-tokens", "0",
                            "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["kv_cache_bytes_per_token"] == 2 * 80 * 8 * 128 * 2 == 327680
    assert abs(d["weights_gib"] - 131) < 1.0
    # 8,192 tokens of KV: 2.7 GB (decimal), as in the source material
    assert abs(327680 * 8192 / 1e9 - 2.68) < 0.01
    for k in ("kv_cache_gib_available", "max_concurrent_sequences"):
        assert k in d


def test_quantization_shrinks_weights() -> None:
    m = CAT.model("llama-3-8b-instruct")
    sizes = {p: memory_fit(CAT, ReplicaConfig(m, "L4", p), 1536).weights_gib for p in ("fp16", "fp8", "int4-awq")}
    assert sizes["fp16"] > sizes["fp8"] > sizes["int4-awq"]
    # AWQ keeps embeddings and lm_head in 16 bits: ~5.5-6 GiB, not 8e9 × 0.5 bytes
    assert 5.0 < sizes["int4-awq"] < 6.5


def test_sliding_window_caps_kv() -> None:
    gemma = CAT.model("gemma-2-27b-it")
    full = kv_cache_bytes_per_token(gemma, 2.0) * 16384
    capped = kv_cache_bytes_per_sequence(gemma, 16384, 2.0)
    assert capped < full
    assert kv_cache_bytes_per_sequence(gemma, 1000, 2.0) == kv_cache_bytes_per_token(gemma, 2.0) * 1000


def test_mla_kv_is_latent_sized() -> None:
    ds = CAT.model("deepseek-v3")
    assert kv_cache_bytes_per_token(ds, 2.0) == 61 * (512 + 64) * 2


def test_fp8_kv_halves_cache() -> None:
    m = CAT.model("llama-3.1-8b-instruct")
    a = memory_fit(CAT, ReplicaConfig(m, "L40S", "bf16", kv_cache_dtype="auto"), 4096)
    b = memory_fit(CAT, ReplicaConfig(m, "L40S", "bf16", kv_cache_dtype="fp8"), 4096)
    assert b.kv_cache_bytes_per_token * 2 == a.kv_cache_bytes_per_token
    assert b.max_concurrent_sequences >= 2 * a.max_concurrent_sequences - 1


def test_too_big_does_not_fit() -> None:
    m = CAT.model("llama-3.1-405b-instruct")
    f = memory_fit(CAT, ReplicaConfig(m, "L4", "bf16"), 2048)
    assert not f.fits and "exceed" in f.reason


MODELS = sorted(CAT.models)
GPUS = ["L4", "A10G", "L40S", "A100-80GB", "H100-SXM", "H200"]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(GPUS), st.sampled_from(["bf16", "fp8", "int4-awq"]),
       st.integers(min_value=256, max_value=32768))
def test_more_tp_never_raises_memory_per_gpu(model: str, gpu: str, precision: str, ctx: int) -> None:
    m = CAT.model(model)
    prev_w = prev_total = None
    for tp in (1, 2, 4, 8):
        f = memory_fit(CAT, ReplicaConfig(m, gpu, precision, tp), ctx)
        per_gpu = f.weights_gib_per_gpu + f.overhead_gib_per_gpu
        if prev_w is not None:
            assert f.weights_gib_per_gpu <= prev_w + 1e-9
            assert per_gpu <= prev_total + 1e-9
        prev_w, prev_total = f.weights_gib_per_gpu, per_gpu
        assert f.kv_cache_bytes_per_sequence <= f.kv_cache_bytes_per_token * ctx + 1e-6
        if f.fits:
            assert f.max_concurrent_sequences * f.kv_cache_bytes_per_sequence <= f.kv_cache_gib_available * GIB + 1


def test_estimate_rejects_a_tp_that_does_not_split_the_heads() -> None:
    r = runner.invoke(app, ["estimate", "--model", "llama-3-8b-instruct", "--gpu", "L4", "--tp", "3"])
    assert r.exit_code == 2
    assert "32 attention heads" in r.output and "Traceback" not in r.output


def _oss(name: str, gpu: str, tp: int = 1) -> ReplicaConfig:
    return ReplicaConfig(CAT.model(name), gpu, "mxfp4", tp=tp, engine="vllm")


def test_gpt_oss_weights_as_vllm_logs_them() -> None:
    """vLLM's own "Model loading took X GiB" for gpt-oss: MXFP4 experts, every linear layer in 16 bits
    (vllm 0.10.2 quantization/mxfp4.py Mxfp4Config.get_quant_method: only FusedMoE layers are MXFP4);
    on Hopper the Triton backend keeps the checkpoint's block scales beside their swizzled copy
    (vllm-project/vllm#33155, H100 Triton backend: 64.38 GiB); below sm90 the Marlin backend pads each
    expert to intermediate % 128, hidden % 256 (vllm-project/vllm#23278, Marlin: 65.9651 GiB; a
    gpt-oss-20b on A100: 13.72 GiB, myoceane.fr 2026-04-18)."""
    assert abs(memory_fit(CAT, _oss("gpt-oss-120b", "H100-SXM"), 1024).weights_gib / 64.38 - 1) < 0.015
    assert abs(memory_fit(CAT, _oss("gpt-oss-120b", "A100-80GB"), 1024).weights_gib / 65.9651 - 1) < 0.015
    assert abs(memory_fit(CAT, _oss("gpt-oss-20b", "A100-80GB"), 1024).weights_gib / 13.72 - 1) < 0.015


def test_gpt_oss_checkpoint_keeps_attention_in_16_bits() -> None:
    """The published gpt-oss-120b checkpoint is ~65.3 GB (60.8 GiB): MXFP4 experts plus 16-bit
    attention, router, embeddings and lm_head; an engine-neutral weight size counts no layout."""
    from sizing.perf.memory import weight_bytes_per_replica
    b = weight_bytes_per_replica(CAT.model("gpt-oss-120b"), CAT.precision("mxfp4"))
    assert abs(b / GIB - 60.8) < 0.4


def test_vllm_profile_samples_one_dummy_request_per_sequence() -> None:
    """vLLM V1's memory profile runs the sampler over min(max_num_seqs, max_num_batched_tokens) dummy
    requests and the whole vocabulary (vllm 0.10.2 gpu_model_runner.py profile_run / _dummy_sampler_run),
    so its KV budget shrinks with max_num_seqs: gpt-oss's 201,088-token vocabulary costs ~2.7 MB per
    sequence on the FlashInfer sampling path (14 bytes per logit)."""
    from dataclasses import replace
    base = ReplicaConfig(CAT.model("gpt-oss-120b"), "H100-SXM", "mxfp4", engine="vllm", max_num_batched_tokens=8192)
    small = memory_fit(CAT, replace(base, max_num_seqs=256), 1024)
    big = memory_fit(CAT, replace(base, max_num_seqs=1024), 1024)
    assert abs((big.overhead_gib_per_gpu - small.overhead_gib_per_gpu) - 768 * 201088 * 14 / GIB) < 0.01
    # never more dummy requests than the token budget holds
    capped = memory_fit(CAT, replace(base, max_num_seqs=1024, max_num_batched_tokens=512), 1024)
    assert capped.overhead_gib_per_gpu == memory_fit(CAT, replace(base, max_num_seqs=512, max_num_batched_tokens=512),
                                                     1024).overhead_gib_per_gpu


def test_sglang_static_fraction_holds_weights_and_kv_only() -> None:
    # sglang 0.5.23 mem_cache/kv_cache_configurator.py _profile_available_bytes: the KV pool is the memory
    # free after the weights less pre_model_load_memory × (1 - mem_fraction_static), so
    # KV = (GPU memory - CUDA context) × fraction - weights; CUDA graphs and activations live in the rest
    m = CAT.model("llama-3-8b-instruct")
    eng = CAT.engine("sglang")
    fit = memory_fit(CAT, ReplicaConfig(m, "L40S", "fp16", engine="sglang"), 2048)
    expected = (fit.gpu_memory_gib_per_gpu - eng.cuda_context_gib_per_gpu) * fit.gpu_memory_utilization \
        - fit.weights_gib_per_gpu
    assert abs(fit.kv_cache_gib_per_gpu - expected) < 1e-9
    # vLLM's --gpu-memory-utilization covers everything: its KV is memory × fraction - weights - overhead
    v = memory_fit(CAT, ReplicaConfig(m, "L40S", "fp16", engine="vllm"), 2048)
    assert abs(v.kv_cache_gib_per_gpu - (v.gpu_memory_gib_per_gpu * v.gpu_memory_utilization - v.weights_gib_per_gpu
                                         - v.overhead_gib_per_gpu)) < 1e-9


def test_sglang_runtime_must_fit_outside_the_static_fraction() -> None:
    m = CAT.model("llama-3-8b-instruct")
    squeezed = ReplicaConfig(m, "L4", "fp16", engine="sglang", gpu_memory_utilization=0.99)
    fit = memory_fit(CAT, squeezed, 2048)
    assert not fit.fits and "outside --mem-fraction-static" in fit.reason
