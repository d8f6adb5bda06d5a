"""Per-class ITL percentiles over tokens (issue 33): a class's ITL p95 is the 95th percentile over all of
its inter-token gaps, as vLLM's benchmark_serving computes it (benchmarks/benchmark_serving.py
calculate_metrics: `itls += outputs[i].itl` for every request, then `np.percentile(itls, p)`), not a
percentile of each request's mean gap. TPOT stays per request."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sizing.traffic.reader import Trace

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _trace(n: int, classes: tuple[str, ...]) -> Trace:
    rng = np.random.default_rng(7)
    t = np.cumsum(rng.exponential(1 / 6.0, n))  # bursts of long prompts stall the decodes beside them
    p = np.where(rng.random(n) < 0.3, 12000, 300).astype(np.int64)
    o = rng.integers(20, 400, n).astype(np.int64)
    k = (np.arange(n) % len(classes)).astype(np.int64)
    return Trace("test", t - t[0], p, o, classes, k, None, 512)


def test_replay_itl_is_over_all_gaps_as_the_simulation_counts_them() -> None:
    from sizing.catalog.lookup import load_catalog
    from sizing.perf.replay import replay
    from sizing.perf.replica import ReplicaConfig
    from sizing.perf.sim import Arrivals, GivenRequests, Lengths, simulate

    cat = load_catalog()
    cfg = ReplicaConfig(cat.model(MODEL), "L40S", "bf16", tp=1)
    tr = _trace(300, ("default",))
    got = replay(cat, cfg, tr, 1, "round-robin").per_class["default"]
    from sizing.perf.replay import shape_of

    sh = shape_of(tr)
    sim = simulate(cat, cfg, Lengths(sh.prompt_tokens, sh.prompt_tokens_p95),
                   Lengths(sh.output_tokens, sh.output_tokens_p95), Arrivals.burst(tr.requests),
                   requests=GivenRequests(tr.arrival_s.astype(float), tr.prompt_tokens, tr.output_tokens,
                                          np.zeros(tr.requests, dtype=np.int64)))
    for q in ("p50", "p95", "p99"):
        assert got["itl_ms"][q] == pytest.approx(sim.itl_ms[q], abs=1e-3), q
    # the prefill stalls put the token-level tail above the per-request mean gaps' tail (TPOT)
    assert got["itl_ms"]["p99"] > got["tpot_ms"]["p99"]


def test_each_class_gets_its_own_gaps() -> None:
    from sizing.catalog.lookup import load_catalog
    from sizing.perf.replay import replay
    from sizing.perf.replica import ReplicaConfig

    cat = load_catalog()
    cfg = ReplicaConfig(cat.model(MODEL), "L40S", "bf16", tp=1)
    tr = _trace(300, ("a", "b"))
    res = replay(cat, cfg, tr, 1, "round-robin")
    both = replay(cat, cfg, Trace("x", tr.arrival_s, tr.prompt_tokens, tr.output_tokens, ("all",),
                                  np.zeros(tr.requests, dtype=np.int64), None, 512), 1, "round-robin")
    lo = min(res.per_class["a"]["itl_ms"]["p95"], res.per_class["b"]["itl_ms"]["p95"])
    hi = max(res.per_class["a"]["itl_ms"]["p95"], res.per_class["b"]["itl_ms"]["p95"])
    assert lo <= both.per_class["all"]["itl_ms"]["p95"] <= hi


def test_docs_quote_the_rule() -> None:
    text = (Path(__file__).resolve().parents[1] / "sizing" / "perf" / "replay.py").read_text(encoding="utf-8")
    assert "itls += outputs[i].itl" in text
