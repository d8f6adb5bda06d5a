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
    # False for a replayed trace: its hits are each request's own history (a conversation's earlier turns),
    # distinct blocks per request that it holds while it runs, not one shared prefix resident once (counting
    # them as free let a replica admit more than its KV cache holds, then preempt in storms)
    hits_shared: bool = True

    def __call__(self, tokens: np.ndarray | int, hits: np.ndarray | int) -> np.ndarray | int:
        """Own blocks for `tokens` tokens in the cache of which `hits` are the shared prefix."""
        if not self.hits_shared:
            hits = 0
        own = -(-tokens // self.blk)
        # a request computing the shared prefix itself fills the prefix's blocks, counted once (not its own)
        past = max(own - hits // self.blk, 0) if isinstance(own, int) else np.maximum(own - hits // self.blk, 0)
        if not self.sw_groups:
            return past
        return self.full_groups * past + self.sw_groups * np.minimum(own, self.win_blocks)


class KvPool:
    """vLLM's pool of KV blocks as far as the scheduler's decisions depend on it (vllm/v1/core/block_pool.py):
    `free` blocks in the free queue, the shared prefix's tokens already cached, and where each preempted
    request's cached blocks sit in the free queue.

    vLLM 0.33 rules followed: a request's full blocks are cached when they are allocated ("num_tokens_to_cache
    = min(total_computed_tokens + num_new_tokens, request.num_tokens)", kv_cache_manager.py allocate_slots), so
    the shared prefix is a hit only once some request has scheduled it, even earlier in the same step. A freed
    request's blocks go to the back of the free queue, "in reverse order so that the tail blocks are evicted
    first" (kv_cache_manager.py free); an allocation takes blocks from the front (evicting what they cached).
    A preempted request is re-admitted with "num_computed_tokens = 0" and then finds its own blocks that
    survived in the prefix cache; touching them takes them out of the free queue, so they count in the
    admission check ("If a computed block is an eviction candidate ... we must count it in the free-capacity
    check", single_type_kv_cache_manager.py). Approximation: the shared prefix's blocks stay resident (vLLM
    can evict them while no running request holds them).
    """

    def __init__(self, free: int, caching: bool = True) -> None:
        self.free = free
        self.caching = caching
        self.prefix_cached = 0  # tokens of the shared prefix cached (whole blocks)
        self._segs: dict[int, list[int]] = {}  # preempted request -> [blocks ahead of its cached ones, left]

    def cached_blocks(self, C: np.ndarray, H: np.ndarray, B: np.ndarray, blk: int) -> np.ndarray:
        """Own blocks of requests with C tokens computed (H of the shared prefix, B own blocks) that hold
        whole computed blocks, i.e. are cached when freed."""
        return np.minimum(np.maximum(C // blk - H // blk, 0), B)

    @property
    def tracking(self) -> bool:
        """Whether a preempted request's cached blocks are in the free queue (where freed blocks go matters)."""
        return bool(self._segs)

    def take(self, m: int) -> None:
        """Allocate m blocks from the front of the free queue (evicting cached blocks there)."""
        self.free -= m
        if not self._segs or m <= 0:
            return
        for r, seg in list(self._segs.items()):
            if seg[0] >= m:
                seg[0] -= m
                continue
            seg[1] -= m - seg[0]
            seg[0] = 0
            if seg[1] <= 0:
                del self._segs[r]

    def give(self, m: int, uncached: int = 0) -> None:
        """Free m blocks of a finished request, `uncached` of them not whole computed blocks: those go to
        the front of the queue ("LIFO reuse of non-cached blocks"), the cached ones to the back ("FIFO reuse
        of cached blocks for LRU eviction behavior", block_pool.py free_blocks)."""
        self.free += m
        if uncached and self._segs:
            for seg in self._segs.values():
                seg[0] += uncached

    def give_preempted(self, r: int, blocks: int, full: int) -> None:
        """A preempted request frees `blocks` own blocks: the `full` whole computed ones (cached) to the back
        of the queue, where they stay hits for its re-admission until evicted; the rest to the front."""
        front = blocks - full
        for seg in self._segs.values():
            seg[0] += front
        if self.caching and full > 0:
            self._segs[r] = [self.free + front, full]
        self.free += blocks

    def own_hit_blocks(self, r: int) -> int:
        """Blocks of request r's own prefix still cached (its tail blocks are evicted first)."""
        seg = self._segs.get(r)
        return seg[1] if seg else 0

    def claim(self, r: int, h: int) -> None:
        """Request r is admitted with h of its cached blocks: they leave the free queue; its other cached
        blocks stay there as plain free blocks."""
        seg = self._segs.pop(r, None)
        if seg is None or h <= 0:
            return
        self.free -= h
        for other in self._segs.values():
            if other[0] > seg[0]:
                other[0] -= h

    def note_scheduled(self, H: np.ndarray | int, computed_after: np.ndarray | int, blk: int) -> None:
        """Requests sharing H tokens of the prefix scheduled up to `computed_after` tokens: their whole
        blocks are now cached."""
        c = np.minimum(H, (np.asarray(computed_after) // blk) * blk)
        if np.size(c):
            self.prefix_cached = max(self.prefix_cached, int(np.max(c)))


@dataclass
class StepPlan:
    """One step's decision: `running` (request indices, admission order) and `sched` (tokens each computes
    this step, 0 = holds its slot but waits), requests preempted (in order) and admitted."""

    running: np.ndarray
    sched: np.ndarray
    preempted: list[int]
    admitted: list[int]


def schedule_step(P: np.ndarray, G: np.ndarray, C: np.ndarray, B: np.ndarray, H: np.ndarray,
                  running: np.ndarray, waiting: deque[int], pool: KvPool, budget_tokens: int, max_seqs: int,
                  kv: KvBlocks, OUT: np.ndarray | None = None) -> StepPlan:
    """vLLM V1's `Scheduler.schedule()` for one step: the RUNNING requests first (each its remaining
    tokens within the budget; preempt the last admitted while blocks are short), then, only if nothing was
    preempted, the WAITING queue FCFS with its prefix-cache hits. Mutates C (hits of admitted requests), B,
    `waiting`, `pool`. `OUT` (async scheduling): a request in `running` that has sampled its OUT tokens
    is one whose last output the engine has not processed yet: it keeps its slot and blocks and gets no
    tokens ("Avoid scheduling an extra step when we are sure that the previous step has reached
    request.max_tokens", scheduler.py)."""
    blk = kv.blk
    budget = budget_tokens
    preempted: list[int] = []
    R = running
    CR, GR = C[R], G[R]
    need = P[R] + GR - CR
    if OUT is not None and R.size:
        need[OUT[R] <= GR] = 0
    sched = np.minimum(np.maximum(budget - (need.cumsum() - need), 0), need)
    newb = kv(CR + sched, H[R]) - B[R]
    newb[sched == 0] = 0
    nb_total = int(newb.sum())
    if nb_total <= pool.free:
        pool.take(nb_total)
        B[R] += newb
        budget -= int(sched.sum())
    else:  # the slow path, request by request: preempt the last admitted until it fits
        order = [int(x) for x in R]
        kept: list[int] = []
        sched_l: list[int] = []
        j = 0
        while j < len(order) and budget > 0:
            r = order[j]
            nt = min(int(P[r] + G[r] - C[r]) if OUT is None or G[r] < OUT[r] else 0, budget)
            nb = int(kv(int(C[r]) + nt, int(H[r]))) - int(B[r])
            while nb > pool.free:
                victim = order.pop()
                full = int(pool.cached_blocks(C[victim], H[victim], B[victim], blk)) if not kv.sw_groups else 0
                pool.give_preempted(victim, int(B[victim]), full)
                B[victim] = 0
                C[victim] = 0
                waiting.appendleft(victim)
                preempted.append(victim)
                if victim == r:
                    break
            if r not in order:
                break
            pool.take(nb)
            B[r] += nb
            budget -= nt
            kept.append(r)
            sched_l.append(nt)
            j += 1
        tail = order[j:]
        R = np.array(kept + tail, dtype=np.int64)
        sched = np.array(sched_l + [0] * len(tail), dtype=np.int64)
    if R.size and H.any():
        pool.note_scheduled(H[R], C[R] + sched, blk)
    # admission from the waiting queue (FCFS), only when nothing was preempted in this step
    adm: list[int] = []
    adm_n: list[int] = []
    if not preempted:
        while waiting and budget > 0 and R.size + len(adm) < max_seqs:
            r = waiting[0]
            c, own = int(C[r]), 0
            if c == 0:  # "max_cache_hit_length = request.num_tokens - 1", whole blocks
                cap = ((int(P[r] + G[r]) - 1) // blk) * blk
                shared = min(int(H[r]), pool.prefix_cached)
                if shared == int(H[r]):
                    own = min(pool.own_hit_blocks(r), max(cap - shared, 0) // blk)
                c = min(shared + own * blk, cap)
            nt = min(int(P[r] + G[r]) - c, budget)
            nb = int(kv(c + nt, int(H[r]))) - int(B[r]) - own
            if nb + own > pool.free:
                break
            waiting.popleft()
            C[r] = c
            pool.claim(r, own)
            pool.take(nb)
            B[r] += nb + own
            budget -= nt
            adm.append(r)
            adm_n.append(nt)
            if H[r]:
                pool.note_scheduled(int(H[r]), c + nt, blk)
    if adm:
        R = np.concatenate([R, np.array(adm, dtype=np.int64)])
        sched = np.concatenate([sched, np.array(adm_n, dtype=np.int64)])
    return StepPlan(R, sched, preempted, adm)


def release(pending: np.ndarray, keep: np.ndarray, running: np.ndarray, preempted: list[int],
            waiting: deque[int], C: np.ndarray, H: np.ndarray, B: np.ndarray, pool: KvPool, blk: int) -> np.ndarray:
    """Free finished requests (`pending`): their blocks go back to the pool (cached ones to the back of
    the free queue, the others to the front); returns running[keep] (`keep`: running without them). One
    preempted (in `preempted`) while its last output was in flight leaves the waiting queue
    ("stopped_preempted_reqs", scheduler.py)."""
    if not pending.size:
        return running
    if preempted:
        gone = set(int(x) for x in pending) & set(preempted)
        if gone:
            kept = [r for r in waiting if r not in gone]
            waiting.clear()
            waiting.extend(kept)
    held = int(B[pending].sum())
    cached = int(pool.cached_blocks(C[pending], H[pending], B[pending], blk).sum()) if pool.tracking else held
    pool.give(held, held - cached)
    B[pending] = 0
    return running[keep]


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
