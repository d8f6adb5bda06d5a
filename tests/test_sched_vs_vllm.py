"""The simulator's scheduler (sizing/perf/batch_scheduler.py, as sim.py runs it) makes vLLM 0.33's decisions,
step by step, checked against vLLM's own V1 `Scheduler` driven on the CPU (bench/sched_check.py): the same
requests scheduled with the same tokens each step, the same running order, preemptions and prefix-cache
hits, with vLLM's synchronous Scheduler and with the AsyncScheduler a GPU engine runs by default, over a
burst far above max_num_seqs, Poisson arrivals, long chunked prompts, KV pressure that
preempts, and a shared prefix.

Runs where the pinned vLLM imports (`pip install -e ".[vllm-check]"`); skipped elsewhere with the reason
(CI does not install the extra: torch and vLLM are several GB)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import sched_check  # noqa: E402

WHY_NOT = sched_check.vllm_importable()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"needs the pinned vLLM: {WHY_NOT}")
SCENARIOS = {s.name: s for s in sched_check.scenarios()}


@pytest.mark.parametrize("engine", ["Scheduler", "AsyncScheduler"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_same_decisions_as_vllms_scheduler_every_step(name: str, engine: str) -> None:
    # AsyncScheduler as a GPU engine runs it by default (one step scheduled ahead of the outputs): our
    # side keeps a finished request's slot and blocks through the next schedule, as sim.py does then
    scn = SCENARIOS[name]
    a = sched_check.compare(scn, sched_check.AsyncVllmDriver if engine == "AsyncScheduler" else None)
    assert a.divergence is None, (
        f"{name}: first divergence at step {a.divergence[0]}\n ours: {a.divergence[1]}\n vllm: {a.divergence[2]}")
    assert a.agreed == a.steps > len(scn.requests)  # every request ran to its end on both sides
    if name == "kv_pressure":
        assert a.totals["vllm"]["preemptions"] > 0 and a.totals["vllm"]["hit_tokens"] > 0
    if name == "shared_prefix":
        assert a.totals["vllm"]["hit_tokens"] > 0


def test_a_different_rule_is_caught() -> None:
    # the check can fail: our side with a token budget one short of vLLM's diverges at the first chunk
    scn = SCENARIOS["long_prompts"]

    class Short(sched_check.OursDriver):
        def __init__(self, s: sched_check.Scenario, lag: bool = False) -> None:
            super().__init__(replace(s, max_num_batched_tokens=s.max_num_batched_tokens - 1), lag)

    orig = sched_check.OursDriver
    sched_check.OursDriver = Short  # type: ignore[misc]
    try:
        a = sched_check.compare(scn)
    finally:
        sched_check.OursDriver = orig  # type: ignore[misc]
    assert a.divergence is not None
