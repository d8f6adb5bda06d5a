"""ITL percentiles of a closed loop in lockstep groups (fixed lengths, all users started together, as
`vllm bench serve --max-concurrency c` with a random dataset runs). Its n requests arrive as k groups of
n/k, k = ceil(n x prompt / token budget) (load._synchronize): a group's prompts are prefilled in one
budget-sized step while the other groups decode, so each request's gaps hold k - 1 prefill-carrying
steps per output, each a whole budget of prompt tokens, and no others. Vultr's Nemotron Nano rows (2,048
in / 512 out, 8,192-token budget): ITL p99 4.3 / 5.2 ms at c = 8 / 16 (1 and 3 such gaps of 511: under
1 %, the p99 is a decode step) and 40.7 / 43.8 ms at c = 32 / 64 (7 and 15 of 511: over 1 %, the p99 is
a full-budget prefill step); the steady-state quantile (others' prompts arriving at random, one chunk
at a time) gave 14 ms for all four."""

from __future__ import annotations

from sizing.catalog.lookup import load_catalog
from sizing.perf.load import WorkloadShape, _ctx, estimate_closed_loop
from sizing.perf.replica import ReplicaConfig

CAT = load_catalog()
CFG = ReplicaConfig(model=CAT.model("llama-3.1-8b-instruct"), gpu="H100-SXM", precision="bf16", engine="vllm",
                    max_num_seqs=1024, max_num_batched_tokens=8192)
SHAPE = WorkloadShape(2048.0, 512.0)


def test_few_lockstep_groups_leave_the_p99_itl_a_decode_step() -> None:
    e = estimate_closed_loop(CAT, CFG, SHAPE, 8, synchronized=True)  # 2 groups: 1 prefill gap in 511
    c = _ctx(CAT, CFG, SHAPE)
    decode = c.sm.step_s(8, c.mean_decode_context)
    assert e.itl_p99_ms < 1.2 * decode * 1e3


def test_many_lockstep_groups_put_a_full_budget_prefill_step_in_the_p99_itl() -> None:
    e = estimate_closed_loop(CAT, CFG, SHAPE, 32, synchronized=True)  # 8 groups: 7 prefill gaps in 511
    c = _ctx(CAT, CFG, SHAPE)
    full = c.sm.step_s(28, c.mean_decode_context, 8192, c.prefill_tokens / 2)
    assert e.itl_p99_ms >= 0.95 * full * 1e3
    assert e.itl_p50_ms < 0.5 * e.itl_p99_ms  # the median gap is a decode step
