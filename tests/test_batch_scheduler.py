"""One step's scheduling decision of the simulator (sizing/perf/batch_scheduler.py): the rules of vLLM 0.33's
V1 scheduler and block pool that bench/sched_check.py found the simulator lacked, each checked on a small
case whose answer is worked out by hand (the full step-by-step comparison with vLLM's own Scheduler is
tests/test_sched_vs_vllm.py, where vLLM installs)."""

from __future__ import annotations

from collections import deque

import numpy as np

from sizing.perf.batch_scheduler import KvBlocks, KvPool, finish_step, release, schedule_step

BLK = 16


def _state(prompts: list[int], outs: list[int], hits: list[int]) -> tuple[np.ndarray, ...]:
    n = len(prompts)
    z = np.zeros(n, dtype=np.int64)
    return (np.array(prompts, dtype=np.int64), np.array(outs, dtype=np.int64), np.array(hits, dtype=np.int64),
            z.copy(), z.copy(), z.copy())


def test_shared_prefix_is_a_hit_only_once_a_request_has_scheduled_it() -> None:
    # vLLM caches a request's whole blocks when it allocates them: the first request computes the 64-token
    # prefix (no hit), the second, admitted in the same step after it, finds the blocks the first allocated
    P, OUT, H, C, G, B = _state([100, 100, 100], [5, 5, 5], [64, 64, 64])
    pool = KvPool(1000 - 64 // BLK)
    waiting = deque([0])
    plan = schedule_step(P, G, C, B, H, np.zeros(0, dtype=np.int64), waiting, pool, 40, 8, KvBlocks(BLK))
    assert plan.admitted == [0] and C[0] == 0 and plan.sched.tolist() == [40]  # a 40-token chunk, no hit
    assert pool.prefix_cached == 32  # two whole blocks of the prefix now cached
    finish_step(P, G, C, OUT, plan.running, plan.sched)
    waiting.extend([1, 2])
    plan = schedule_step(P, G, C, B, H, plan.running, waiting, pool, 200, 8, KvBlocks(BLK))
    # request 0 finishes its prompt (60 tokens), which caches the whole prefix; 1 and 2 then hit all 64
    assert plan.sched.tolist() == [60, 36, 36] and C[1] == 64 and C[2] == 64


def test_prefix_blocks_filled_by_the_request_computing_them_are_not_its_own() -> None:
    # the shared prefix's blocks are resident once (reserved up front): the request that fills them holds
    # only the blocks past the prefix
    kv = KvBlocks(BLK)
    assert kv(40, 64) == 0 and kv(100, 64) == 3 and kv(64, 64) == 0


def _step(st: tuple[np.ndarray, ...], running: np.ndarray, waiting: deque[int], pool: KvPool,
          budget: int = 512) -> tuple[np.ndarray, list[int], list[int]]:
    """One step and its bookkeeping as sim.py does it: returns (running after, preempted, sched tokens)."""
    P, OUT, H, C, G, B = st
    plan = schedule_step(P, G, C, B, H, running, waiting, pool, budget, 8, KvBlocks(BLK))
    _, fin = finish_step(P, G, C, OUT, plan.running, plan.sched)
    held = int(B[fin].sum())
    pool.give(held, held - int(pool.cached_blocks(C[fin], H[fin], B[fin], BLK).sum()))
    B[fin] = 0
    return plan.running[~np.isin(plan.running, fin)], plan.preempted, plan.sched.tolist()


def test_preempted_request_resumes_with_its_own_cached_blocks() -> None:
    # 11 blocks, two 64-token prompts: at token 81 request 1 finds no block and preempts itself (the last
    # admitted); request 0 finishes there. Re-admitted, request 1 finds its 5 whole computed blocks still
    # cached (vLLM: "request.num_computed_tokens = 0", then a prefix hit) and recomputes 1 token, not 81
    st = _state([64, 64], [18, 200], [0, 0])
    C = st[3]
    pool = KvPool(11)
    waiting = deque([0, 1])
    running, pre, sched = _step(st, np.zeros(0, dtype=np.int64), waiting, pool)
    assert sched == [64, 64] and pool.free == 3
    for _ in range(16):  # decodes to 80 tokens each: 5 blocks each
        running, pre, sched = _step(st, running, waiting, pool)
        assert not pre and sched == [1, 1]
    running, pre, sched = _step(st, running, waiting, pool)
    assert pre == [1] and sched == [1] and running.size == 0
    assert pool.own_hit_blocks(1) == 5 and C[1] == 0 and pool.free == 11
    running, pre, sched = _step(st, running, waiting, pool)
    # hit 80 of its 81 tokens ("num_tokens - 1", whole blocks), then compute 1 and sample its 18th
    assert sched == [1] and C[1] == 81 and st[4][1] == 18


def test_eviction_takes_uncached_blocks_first_then_the_preempted_requests_tail() -> None:
    # vLLM's free_blocks: non-cached blocks to the front of the free queue, cached ones to the back in reverse
    # (tail first); allocation takes from the front
    pool = KvPool(3)
    pool.give_preempted(7, blocks=6, full=5)  # 1 partial block to the front, 5 cached behind the 3 free
    assert pool.free == 9 and pool.own_hit_blocks(7) == 5
    pool.take(4)  # the partial block and the 3 free ones
    assert pool.own_hit_blocks(7) == 5
    pool.give(4, uncached=2)  # a finished request: 2 uncached blocks to the front, 2 cached to the back
    pool.take(3)  # the 2 uncached, then request 7's tail block
    assert pool.own_hit_blocks(7) == 4
    pool.claim(7, 4)
    assert pool.free == 9 - 4 + 4 - 3 - 4 and pool.own_hit_blocks(7) == 0


def test_async_scheduling_keeps_a_finished_requests_slot_through_the_next_schedule() -> None:
    # vLLM's AsyncScheduler schedules step N+1 before it processes step N's output: a request that sampled
    # its last token in step N gets no tokens then but still counts against max_num_seqs (here 2), so the
    # waiting request is admitted one step later than under the synchronous scheduler
    P, OUT, H, C, G, B = _state([16, 16, 16], [1, 5, 5], [0, 0, 0])
    kv = KvBlocks(BLK)
    pool = KvPool(100)
    waiting = deque([0, 1, 2])
    plan = schedule_step(P, G, C, B, H, np.zeros(0, dtype=np.int64), waiting, pool, 512, 2, kv, OUT)
    assert plan.admitted == [0, 1]
    _, fin = finish_step(P, G, C, OUT, plan.running, plan.sched)
    assert fin.tolist() == [0]  # request 0 wanted one token
    plan = schedule_step(P, G, C, B, H, plan.running, waiting, pool, 512, 2, kv, OUT)
    assert plan.running.tolist() == [0, 1] and plan.sched.tolist() == [0, 1] and plan.admitted == []
    running = release(fin, plan.running != 0, plan.running, plan.preempted, waiting, C, H, B, pool, BLK)
    assert running.tolist() == [1] and B[0] == 0 and pool.free == 100 - 2  # request 1 holds 2 blocks (17 tokens)
    plan = schedule_step(P, G, C, B, H, running, waiting, pool, 512, 2, kv, OUT)
    assert plan.admitted == [2]
