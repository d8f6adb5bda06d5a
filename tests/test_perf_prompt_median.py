"""The median request's prompt under long-tailed (ShareGPT-like) lengths: the p50 TTFT is the prefill of
the median prompt, below the mean, from the same log-normal (mean and p95) that the output lengths use
(sizing.perf.load._decode_steps_q)."""

from __future__ import annotations

import math

import pytest

from sizing.catalog.lookup import load_catalog
from sizing.perf.load import WorkloadShape, _ctx, _prompt_q, estimate_open_loop, lognormal_sigma
from sizing.perf.replica import ReplicaConfig

CAT = load_catalog()


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_p50_ttft_is_the_median_prompts_prefill(engine: str) -> None:
    # sgl060's shape: ShareGPT means 215 / 194 tokens, p95 = 3 x mean (BENCHMARK_ASSUMPTIONS sharegpt_tail)
    cfg = ReplicaConfig(model=CAT.model("llama-3.1-8b-instruct"), gpu="A100-80GB", precision="bf16", tp=1,
                        engine=engine)
    sigma = lognormal_sigma(215.0, 645.0)
    median = 215.0 * math.exp(-sigma * sigma / 2.0)  # a log-normal's median is its mean x exp(-σ²/2)
    assert 130 < median < 150
    tail = estimate_open_loop(CAT, cfg, WorkloadShape(215.0, 194.0, 645.0, 582.0), 0.01)
    at_median = estimate_open_loop(CAT, cfg, WorkloadShape(median, 194.0, 645.0, 582.0), 0.01)
    # the median request's TTFT is the prefill of the median prompt, not of the mean one
    assert tail.ttft_p50_ms < 0.9 * tail.ttft_ms
    assert abs(tail.ttft_p50_ms - at_median.ttft_ms) / at_median.ttft_ms < 0.03
    assert tail.ttft_p50_ms <= tail.ttft_p95_ms <= tail.ttft_p99_ms


def test_fixed_lengths_keep_the_mean_prompt() -> None:
    cfg = ReplicaConfig(model=CAT.model("llama-3.1-8b-instruct"), gpu="A100-80GB", precision="bf16", tp=1)
    c = _ctx(CAT, cfg, WorkloadShape(215.0, 194.0))
    assert [_prompt_q(c, q) for q in (0.5, 0.95, 0.99)] == pytest.approx([215.0] * 3, rel=1e-12)
