"""One scheduling decision of the step-level simulation (sizing.perf.sim), as vLLM V1's scheduler makes it.

Owns: which requests run in a step and how many tokens each computes (chunked prefill under the token
budget, max_num_seqs), KV-block allocation with FCFS recompute preemption, FCFS admission from the waiting
queue with prefix-cache hits, and the bookkeeping after a step (tokens computed, tokens sampled, requests
finished, blocks freed). No time: sim.py prices each step with the roofline step model, and
bench/sched_check.py drives this same code beside vLLM's own `Scheduler` to check each decision.
The rules and the lines of vLLM 0.33.0 they follow are listed in sim.py's module docstring.

State lives in integer arrays indexed by request (tokens): P prompt, OUT output wanted, H prefix-cache hit
(whole blocks of a shared prefix, resident once), C computed (in the KV cache), G sampled, B own blocks held.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class KvBlocks:
    """Blocks a request holds in vLLM's (hybrid) KV cache manager: `blk` tokens a block; full-attention
    groups need one per `blk` tokens past the shared prefix, sliding-window groups at most `win_blocks`."""

    blk: int
    full_groups: int = 1
    sw_groups: int = 0
    win_blocks: int = 0

    def __call__(self, tokens: np.ndarray | int, hits: np.ndarray | int) -> np.ndarray | int:
        """Own blocks for `tokens` tokens in the cache of which `hits` are the shared prefix."""
        own = -(-tokens // self.blk)
        if not self.sw_groups:
            return own - hits // self.blk
        return self.full_groups * (own - hits // self.blk) + self.sw_groups * np.minimum(own, self.win_blocks)


@dataclass
class StepPlan:
    """One step's decision: `running` (request indices, admission order) and `sched` (tokens each computes
    this step, 0 = holds its slot but waits), requests preempted (in order) and admitted, and `free`,
    the pool's free blocks after the allocations."""

    running: np.ndarray
    sched: np.ndarray
    preempted: list[int]
    admitted: list[int]
    free: int


def schedule_step(P: np.ndarray, G: np.ndarray, C: np.ndarray, B: np.ndarray, H: np.ndarray,
                  running: np.ndarray, waiting: deque[int], free: int, budget_tokens: int, max_seqs: int,
                  kv: KvBlocks) -> StepPlan:
    """vLLM V1's `Scheduler.schedule()` for one step: the RUNNING requests first (each its remaining
    tokens within the budget; preempt the last admitted while blocks are short), then, only if nothing was
    preempted, the WAITING queue FCFS. Mutates C (prefix hits of admitted requests), B, `waiting`."""
    budget = budget_tokens
    preempted: list[int] = []
    R = running
    CR, GR = C[R], G[R]
    need = P[R] + GR - CR
    sched = np.minimum(np.maximum(budget - (need.cumsum() - need), 0), need)
    newb = kv(CR + sched, H[R]) - B[R]
    newb[sched == 0] = 0
    nb_total = int(newb.sum())
    if nb_total <= free:
        free -= nb_total
        B[R] += newb
        budget -= int(sched.sum())
    else:  # the slow path, request by request: preempt the last admitted until it fits
        order = [int(x) for x in R]
        kept: list[int] = []
        sched_l: list[int] = []
        j = 0
        while j < len(order) and budget > 0:
            r = order[j]
            nt = min(int(P[r] + G[r] - C[r]), budget)
            nb = int(kv(int(C[r]) + nt, int(H[r]))) - int(B[r])
            while nb > free:
                victim = order.pop()
                free += int(B[victim])
                B[victim] = 0
                C[victim] = 0
                waiting.appendleft(victim)
                preempted.append(victim)
                if victim == r:
                    break
            if r not in order:
                break
            free -= nb
            B[r] += nb
            budget -= nt
            kept.append(r)
            sched_l.append(nt)
            j += 1
        tail = order[j:]
        R = np.array(kept + tail, dtype=np.int64)
        sched = np.array(sched_l + [0] * len(tail), dtype=np.int64)
    # admission from the waiting queue (FCFS), only when nothing was preempted in this step
    adm: list[int] = []
    adm_n: list[int] = []
    if not preempted:
        while waiting and budget > 0 and R.size + len(adm) < max_seqs:
            r = waiting[0]
            if C[r] == 0:
                C[r] = min(int(H[r]), ((int(P[r] + G[r]) - 1) // kv.blk) * kv.blk)
            nt = min(int(P[r] + G[r] - C[r]), budget)
            nb = int(kv(int(C[r]) + nt, int(H[r]))) - int(B[r])
            if nb > free:
                break
            waiting.popleft()
            free -= nb
            B[r] += nb
            budget -= nt
            adm.append(r)
            adm_n.append(nt)
    if adm:
        R = np.concatenate([R, np.array(adm, dtype=np.int64)])
        sched = np.concatenate([sched, np.array(adm_n, dtype=np.int64)])
    return StepPlan(R, sched, preempted, adm, free)


def finish_step(P: np.ndarray, G: np.ndarray, C: np.ndarray, OUT: np.ndarray, running: np.ndarray,
                sched: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """After one step of `schedule_step`'s plan: the scheduled tokens are computed, a request whose
    computed tokens reach its prompt plus outputs samples one token. Returns (sampled, finished): request
    indices; the finished (OUT tokens sampled) are still in `running` and hold their blocks (the caller
    frees them)."""
    need = P[running] + G[running] - C[running]
    C[running] += sched
    sampled = running[(sched > 0) & (sched == need)]
    G[sampled] += 1
    return sampled, running[G[running] >= OUT[running]]
