"""Speculative decoding in the step and load model (sizing.perf.spec_decode, StepModel spec terms) and in
the calibration rows that run it (bench/calib_rows.py BENCHMARK_ASSUMPTIONS['speculative_decoding'])."""

from __future__ import annotations

import dataclasses

import pytest

from bench.calib_rows import load_rows, predict
from sizing.catalog.lookup import load_catalog
from sizing.errors import PerfModelError
from sizing.perf.load import WorkloadShape, _ctx, estimate_burst, estimate_closed_loop
from sizing.perf.replica import ReplicaConfig
from sizing.perf.spec_decode import SpecDecode, acceptance_length

CAT = load_catalog()
DEEPSEEK = CAT.model("deepseek-r1")
SHAPE = WorkloadShape(1000.0, 300.0)


def _cfgs(k: int, model_name: str = "llama-3.1-8b-instruct", acc: float = 3.0) -> tuple[ReplicaConfig, ReplicaConfig]:
    plain = ReplicaConfig(model=CAT.model(model_name), gpu="H100-SXM", precision="bf16")
    return plain, dataclasses.replace(plain, spec=SpecDecode("eagle", k, acc))


def test_spec_speeds_up_small_batches_and_the_gain_shrinks_toward_compute_bound() -> None:
    plain, spec = _cfgs(4)
    gains = []
    for n in (1, 16, 128, 512):
        a, b = estimate_closed_loop(CAT, plain, SHAPE, n), estimate_closed_loop(CAT, spec, SHAPE, n)
        gains.append(a.itl_ms / b.itl_ms)
    assert gains[0] > 1.5  # 3 tokens a step at batch 1, where verifying 5 tokens costs about what 1 does
    assert gains == sorted(gains, reverse=True)  # each step verifies 5 tokens per sequence: compute-bound sooner
    assert gains[-1] < 0.6 * gains[0]


def test_spec_can_lose_when_compute_bound() -> None:
    """Large batches, many drafted tokens and poor acceptance: the verify work outweighs the accepted tokens."""
    plain, spec = _cfgs(8, acc=1.2)
    a, b = estimate_closed_loop(CAT, plain, SHAPE, 512), estimate_closed_loop(CAT, spec, SHAPE, 512)
    assert b.itl_ms > a.itl_ms


def test_no_gain_without_acceptance() -> None:
    """Acceptance length 1: every step still verifies k + 1 tokens and runs the draft, for one token."""
    plain, spec = _cfgs(2, acc=1.0)
    a, b = estimate_closed_loop(CAT, plain, SHAPE, 1), estimate_closed_loop(CAT, spec, SHAPE, 1)
    assert b.itl_ms > a.itl_ms


@pytest.mark.parametrize("n", [1, 64, 512])
def test_spec_throughput_never_above_the_roofline(n: int) -> None:
    plain, spec = _cfgs(4)
    e = estimate_closed_loop(CAT, spec, SHAPE, n)
    c = _ctx(CAT, spec, SHAPE)
    gpu = CAT.gpu("H100-SXM")
    acc, q = 3.0, 5.0
    # each step reads the weights once and yields acc tokens per running sequence
    mem_bound = e.max_concurrent_sequences * acc / (c.sm.dense_bytes_per_gpu / (gpu.memory_bandwidth_gbs * 1e9))
    # each accepted token costs q / acc verified tokens' FLOPs at the datasheet peak
    flop_bound = gpu.bf16_dense_tflops * 1e12 / (c.sm.flops_per_token_per_gpu * q / acc)
    assert e.output_tokens_per_s <= min(mem_bound, flop_bound)


def test_acceptance_length_from_the_data_file() -> None:
    assert acceptance_length(CAT, DEEPSEEK, SpecDecode("mtp", 1)) == pytest.approx(1.85)
    qwen = dataclasses.replace(DEEPSEEK, model_type="qwen3_5_moe_text")
    assert acceptance_length(CAT, qwen, SpecDecode("mtp", 4)) == pytest.approx(1 + 0.647 + 0.591 + 0.457 + 0.38)
    assert acceptance_length(CAT, qwen, SpecDecode("mtp", 4, 2.5)) == 2.5  # a measured figure wins
    with pytest.raises(PerfModelError, match="no acceptance rate for deepseek_v3 mtp at draft position"):
        acceptance_length(CAT, DEEPSEEK, SpecDecode("mtp", 3))


@pytest.mark.parametrize(("args", "field"), [(("medusa", 2), "method"), (("mtp", 0), "num_tokens"),
                                             (("mtp", 1, 2.5), "acceptance_length")])
def test_bad_spec_is_one_clear_line(args: tuple, field: str) -> None:
    with pytest.raises(PerfModelError, match=field.split("_")[0]):
        SpecDecode(*args)


def test_sglang_caps_the_running_batch_under_spec() -> None:
    """sglang server_args _handle_speculative_decoding: max_running_requests 48 unless given."""
    cfg = ReplicaConfig(model=DEEPSEEK, gpu="H200", precision="fp8", tp=8, engine="sglang")
    spec = dataclasses.replace(cfg, spec=SpecDecode("mtp", 1))
    shape = WorkloadShape(220.0, 200.0, 660.0, 600.0)
    assert _ctx(CAT, spec, shape).max_running == 48
    assert _ctx(CAT, dataclasses.replace(spec, max_num_seqs=256), shape).max_running == 256
    assert _ctx(CAT, cfg, shape).max_running > 48
    # a 1,000-prompt burst through 48 slots: lower throughput, longer TTFT than the plain server's
    a, b = estimate_burst(CAT, cfg, shape, 1000), estimate_burst(CAT, spec, shape, 1000)
    assert b.output_tokens_per_s < a.output_tokens_per_s and b.ttft_ms > a.ttft_ms


def test_calibration_rows_read_spec_from_their_commands() -> None:
    rows = {r.id: r for r in load_rows(CAT)}
    sgl = rows["gpsdsr1-0070"]  # SGLang --speculative-algorithm EAGLE --speculative-num-steps 1 (NextN), ITL
    assert sgl.cfg.spec == SpecDecode("mtp", 1) and sgl.tokens_per_chunk == pytest.approx(1.85)
    assert rows["gpsq35moel-0125"].cfg.spec == SpecDecode("mtp", 1)
    assert {r.cfg.spec.num_tokens for r in rows.values() if r.source == "gpsq35moe" and r.cfg.spec} == {4}
    assert sum(r.cfg.spec is not None for r in rows.values()) == 186
    assert rows["gpsdsr1-0001"].cfg.spec is None
    # ITL of a spec row: a streamed chunk carries the accepted tokens, TPOT is per token
    itl, tpot = predict(CAT, sgl), predict(CAT, rows["gpsdsr1-0067"])
    assert itl / tpot == pytest.approx(1.85, rel=0.25)


def test_a_prompt_waits_whole_speculative_steps() -> None:
    """TTFT: a prompt's chunk rides a whole step (k + 1 verified tokens per running sequence, the draft over
    the step's tokens too), not the per-token share a decoding sequence pays."""
    plain, spec = _cfgs(4)
    c = _ctx(CAT, spec, SHAPE)
    assert c.sm.wall_step_s(8, 1150.0) == pytest.approx(c.sm.spec_accept_len * c.sm.step_s(8, 1150.0))
    assert c.sm.wall_step_s(8, 1150.0, 1000.0, 500.0) > c.sm.step_s(8, 1150.0, 1000.0, 500.0)
    for n in (1, 8):
        assert estimate_closed_loop(CAT, spec, SHAPE, n).ttft_ms >= estimate_closed_loop(CAT, plain, SHAPE, n).ttft_ms


def test_spec_flags_as_the_engines_spell_them() -> None:
    from bench.calib_rows import _spec

    assert _spec('--speculative-config={"method": "deepseek_mtp", "num_speculative_tokens": 2}', "vllm") \
        == SpecDecode("mtp", 2)
    assert _spec("--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1", "sglang") \
        == SpecDecode("mtp", 3)
    assert _spec("vllm serve m --max-num-seqs 8", "vllm") is None
