"""TTFT of a closed loop in lockstep groups (fixed lengths, all users started together: `vllm bench serve
--max-concurrency c` on a random dataset). The n prompts need k = ceil(n x prompt / budget) steps, so the
first round leaves k groups whose first tokens are a prefill-carrying step apart; but a request's last
token comes `output - 1` steps after its first, and those are decode steps, so the groups finish one
decode step apart and their next prompts arrive that close together. vLLM V1's scheduler (and
sizing.perf.sim, which runs its rules step by step) prefills one group per step FCFS, so group i waits out
the groups before it, as many as finish within the re-send lag (load._lockstep_queue_s). Vultr's
Nemotron Nano (2,048 / 512, 8,192-token budget): 152 / 160 / 206 / 324 ms at c = 8 / 16 / 32 / 64; the
staggered-groups model gave 66 / 70 / 86 / 149 (one group's step whatever the users)."""

from __future__ import annotations

from sizing.catalog.lookup import load_catalog
from sizing.perf.load import WorkloadShape, _ctx, estimate_closed_loop
from sizing.perf.replica import ReplicaConfig
from sizing.perf.sim import Arrivals, Lengths, simulate

CAT = load_catalog()
CFG = ReplicaConfig(model=CAT.model("llama-3.1-8b-instruct"), gpu="H100-SXM", precision="bf16", engine="vllm",
                    max_num_seqs=1024, max_num_batched_tokens=8192)
SHAPE = WorkloadShape(2048.0, 512.0)


def test_lockstep_groups_queue_behind_each_other() -> None:
    # 16 users = 4 groups of 4 prompts (one budget each): the last group waits out three groups' steps
    e16 = estimate_closed_loop(CAT, CFG, SHAPE, 16, synchronized=True)
    c = _ctx(CAT, CFG, SHAPE)
    step = c.sm.step_s(12, c.mean_decode_context, 8192, c.prefill_tokens / 2)
    assert e16.ttft_ms > 1e3 * (c.request_overhead_s + 2.0 * step)
    # the queue is as deep as the groups that finish within the re-send lag: more users, no deeper
    e64 = estimate_closed_loop(CAT, CFG, SHAPE, 64, synchronized=True)
    assert e64.ttft_p99_ms < e16.ttft_p99_ms + 1e3 * step


def test_lockstep_ttft_matches_the_step_level_scheduler() -> None:
    for n in (16, 32):
        e = estimate_closed_loop(CAT, CFG, SHAPE, n, synchronized=True)
        sim = simulate(CAT, CFG, Lengths(2048), Lengths(512), Arrivals.closed(n), staggered=False,
                       n_requests=10 * n)
        assert 0.75 < e.ttft_ms / sim.ttft_ms["mean"] < 1.33, (n, e.ttft_ms, sim.ttft_ms["mean"])


def test_queued_groups_mean_gap_matches_the_step_level_scheduler() -> None:
    # the queue serves the groups in consecutive steps, so a request's gaps hold the prefill steps of the
    # groups after it in its round (and of those the next round serves before it finishes), not every
    # other group's: the steady state's mean gap (prompts arriving at random) was 10 % / 7 % above the
    # scheduler's at 16 / 32 users
    for n in (16, 32):
        e = estimate_closed_loop(CAT, CFG, SHAPE, n, synchronized=True)
        sim = simulate(CAT, CFG, Lengths(2048), Lengths(512), Arrivals.closed(n), staggered=False,
                       n_requests=10 * n)
        assert abs(e.percentile("tpot", "mean") / sim.tpot_ms["mean"] - 1.0) < 0.04, (n, e.tpot_ms)
