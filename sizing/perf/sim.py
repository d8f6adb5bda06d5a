"""Step-level simulation of continuous batching on one model replica, as vLLM V1 schedules it.

Owns: the scheduler loop (admission, chunked prefill in integer chunks, KV blocks, preemption,
prefix-cache hits), the arrival processes (Poisson rate, closed-loop concurrency, a burst of N
prompts), request-length distributions, and the percentiles that come out (TTFT, ITL, TPOT, E2E),
throughput and goodput. Each step's time comes from the roofline physics in sizing.perf.step
(`engine_step_s`; `_step_time` below is its vectorized twin, tested equal). No planner logic.

Scheduler rules implemented (vLLM 0.33.0 wheel, vllm/v1/core/sched/scheduler.py, `schedule()`):
- "There's no 'decoding phase' nor 'prefill phase' in the scheduler. Each request just has the
  num_computed_tokens and num_tokens_with_spec ... the scheduler tries to assign tokens to the
  requests so that each request's num_computed_tokens can catch up its num_tokens_with_spec."
- "First, schedule the RUNNING requests": in admission order, `while req_index < len(self.running)
  and token_budget > 0`, each gets `num_new_tokens = min(num_new_tokens, token_budget, ...)`; a
  running decode needs 1 token, a running partial prefill the rest of its prompt. The budget is
  `max_num_scheduled_tokens`, i.e. max_num_batched_tokens (long_prefill_token_threshold 0 = off).
- Preemption when `allocate_slots` returns None: FCFS "preempted_req = self.running[-1]" (the last
  admitted), repeated until the request fits or is itself preempted; `_preempt_request` frees its
  blocks, sets "request.num_computed_tokens = 0" (recompute) and "self.waiting.prepend_request".
- "Next, schedule the WAITING requests" only "if not preempted_reqs": FCFS while `token_budget > 0`
  and `len(self.running) < max_num_running_reqs` (max_num_seqs); prefix-cache hits come first
  (`get_computed_blocks`, whole blocks, at most "request.num_tokens - 1" tokens: kv_cache_manager.py),
  then `num_new_tokens = min(num_new_tokens, request_token_budget)` (chunked prefill); a request
  whose blocks cannot be allocated stops admission for this step.
- Prefix cache (sizing/perf/batch_scheduler.py KvPool): the shared prefix is a hit only once some
  request has scheduled its blocks (blocks are cached at allocation); a preempted request, re-admitted,
  hits its own blocks still in the free queue (freed tail first, evicted from the front).
- One block is vLLM's null block ("self.null_block = self.free_block_queue.popleft()", block_pool.py).
- Checked step by step against vLLM 0.33's own Scheduler: bench/sched_check.py, tests/test_sched_vs_vllm.py.
- Block size 16 tokens (sizing/data/platform.csv `vllm_kv_block_size`, from vllm/config/cache.py).
A request's first token is sampled in the step that computes its last prompt token; each later
step that computes one token samples the next. The per-request overhead (HTTP, tokenization;
perf_calibration `request_overhead_ms`) delays its arrival at the engine and counts in TTFT and
E2E; the API server hands requests to the engine one after another (`frontend_ms_per_request`).

Speed: consecutive decode-only steps with an unchanged batch (no admission possible, no finish, no
block shortage) are advanced together in one call of the step model at their mid context (exact
for the memory-bound part, which is linear in context). Request counts are bounded (MAX_REQUESTS).
Units: seconds inside, ms in SimResult, tokens/s and requests/s per replica. Deterministic for a
seed (numpy PCG64).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from sizing.catalog.platform import number
from sizing.perf.batch_scheduler import KvBlocks, KvPool, release, schedule_step
from sizing.perf.load import WorkloadShape, _ctx, _engine_limits, lognormal_sigma
from sizing.perf.memory import GIB, kv_cache_bytes_per_token, kv_replication_factor, vllm_pool_blocks
from sizing.perf.replica import ReplicaConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from sizing.catalog.lookup import Catalog
    from sizing.perf.step import StepModel

P95_Z = 1.6448536269514722  # standard-normal 95th percentile
QUANTILES = (50, 90, 95, 99)
MAX_REQUESTS = 1200  # most requests one simulation runs (bounds its time)
MAX_ITERATIONS = 200_000  # scheduler iterations before a run is declared unstable (overload)
STOP_EVERY = 64  # scheduler iterations between two asks of simulate's `stop` (a time budget's clock)
ArrivalKind = Literal["poisson", "closed", "burst"]


class SimulationStopped(RuntimeError):
    """simulate's `stop` answered True: the caller's time budget is spent (no result)."""


@dataclass(frozen=True)
class Arrivals:
    """How requests arrive: `poisson` at `value` requests/s, `closed` with `value` requests always
    in flight (a new one the moment one finishes), or `burst`: `value` prompts all at t = 0."""

    kind: ArrivalKind
    value: float

    @classmethod
    def poisson(cls, requests_per_s: float) -> Arrivals:
        return cls("poisson", float(requests_per_s))

    @classmethod
    def closed(cls, concurrency: int) -> Arrivals:
        return cls("closed", float(concurrency))

    @classmethod
    def burst(cls, n_prompts: int) -> Arrivals:
        return cls("burst", float(n_prompts))


@dataclass(frozen=True)
class Lengths:
    """Tokens per request: fixed at `mean`, or log-normal fitted to `mean` and `p95` (a long tail)."""

    mean: float
    p95: float | None = None

    def sample(self, rng: np.random.Generator, n: int, cap: int) -> np.ndarray:
        """n integer lengths in [1, cap]."""
        if self.p95 is None or self.p95 <= self.mean:
            return np.full(n, max(1, min(int(round(self.mean)), cap)), dtype=np.int64)
        s = lognormal_sigma(self.mean, self.p95)
        mu = math.log(self.mean) - s * s / 2.0
        x = rng.lognormal(mu, s, n)
        return np.clip(np.rint(x), 1, cap).astype(np.int64)


@dataclass(frozen=True)
class GivenRequests:
    """Recorded requests for one replica (a trace's share, sizing.perf.replay): client send times
    (s, ascending), prompt and output tokens, and prompt tokens each finds in the prefix cache.
    Every request is measured (no warm-up window) and their per-request times come back."""

    send_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    prefix_hit_tokens: np.ndarray


@dataclass(frozen=True)
class RequestSlo:
    """Per-request targets for goodput (vLLM bench --goodput style), ms; None = not checked."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None


@dataclass(frozen=True)
class SimResult:
    """Measured over the steady-state window (poisson/closed) or the whole run (burst).
    Latency dicts map "mean", "p50", "p90", "p95", "p99" to ms: TTFT and E2E over requests, ITL
    over all token gaps, TPOT over requests' mean gaps. Throughput per replica."""

    requests: int
    ttft_ms: dict[str, float]
    itl_ms: dict[str, float]
    tpot_ms: dict[str, float]
    e2e_ms: dict[str, float]
    output_tokens_per_s: float
    requests_per_s: float
    goodput_requests_per_s: float
    goodput_output_tokens_per_s: float
    preemptions: int
    steps: int
    mean_running: float
    max_running: int
    kv_blocks: int
    stable: bool
    notes: list[str] = field(default_factory=list)
    # with `requests=` (a recorded trace): each request's times in s (send, first token, last token;
    # nan if unfinished), tokens (prompt, output, served from the prefix cache); else None
    per_request: dict[str, np.ndarray] | None = None

    def percentile(self, metric: str, q: str) -> float:
        """metric ttft | itl | tpot | e2e; q mean | p50 | p90 | p95 | p99 (ms)."""
        return getattr(self, f"{metric}_ms")[q]


def _step_time(sm: StepModel, ctx: np.ndarray, pn: np.ndarray, pc: np.ndarray) -> float:
    """engine_step_s (sizing.perf.step) on arrays: decodes with contexts `ctx`, prefill chunks of `pn`
    new tokens after `pc` cached ones. Same formula, vectorized (tests/test_perf_sim.py checks it)."""
    f, win, kvt = sm.kv_full_fraction, sm.sliding_window, sm.kv_bytes_per_token_per_gpu
    d = float(ctx.size)
    if sm.attn_topk < math.inf:  # DSA: StepModel.kv_read_bytes per sequence
        return _sparse_step_time(sm, ctx, pn, pc)
    if d:
        s = float(ctx.sum())
        kv = kvt * (f * s + (1 - f) * (float(np.minimum(ctx, win).sum()) if f < 1 else 0.0))
        ctx_mean = s / d
    else:
        kv, ctx_mean = 0.0, 0.0
    p = float(pn.sum()) if pn.size else 0.0
    if p:
        pctx = float((pn * (pc + pn / 2.0)).sum()) / p
        live = pc[pn > 0]
        kv += kvt * (f * float(live.sum()) + (1 - f) * (float(np.minimum(live, win).sum()) if f < 1 else 0.0))
    else:
        pctx = 0.0
    if sm.state_bytes_per_seq_per_gpu:  # a hybrid's states: read and written once per sequence in the step
        kv += 2.0 * sm.state_bytes_per_seq_per_gpu * (d + (float(np.count_nonzero(pn)) if pn.size else 0.0))
    return sm.step_s(d, ctx_mean, p, pctx, kv_read_bytes=kv)


def _sparse_step_time(sm: StepModel, ctx: np.ndarray, pn: np.ndarray, pc: np.ndarray) -> float:
    """_step_time under DeepSeek sparse attention: each decode reads its top-k keys' KV and the indexer's
    keys of its whole context (StepModel.kv_read_bytes); a prefill chunk reads its cached prefix the same way."""
    f, ix, kvt = sm.kv_full_fraction, sm.indexer_fraction, sm.kv_bytes_per_token_per_gpu

    def read(c: np.ndarray) -> float:
        attended = f * float(np.minimum(c, sm.attn_topk).sum()) \
            + (1 - f) * float(np.minimum(c, sm.sliding_window).sum())
        return kvt * ((1 - ix) * attended + ix * float(c.sum()))

    d = float(ctx.size)
    kv = read(ctx) if d else 0.0
    ctx_mean = float(ctx.sum()) / d if d else 0.0
    p = float(pn.sum()) if pn.size else 0.0
    pctx = float((pn * (pc + pn / 2.0)).sum()) / p if p else 0.0
    if p:
        kv += read(pc[pn > 0])
    return sm.step_s(d, ctx_mean, p, pctx, kv_read_bytes=kv)


def weighted_quantiles(values: np.ndarray, weights: np.ndarray) -> dict[str, float]:
    """Mean and QUANTILES (inverted CDF) of values with integer weights."""
    if values.size == 0:
        return {"mean": 0.0, **{f"p{q}": 0.0 for q in QUANTILES}}
    order = np.argsort(values)
    v, cw = values[order], np.cumsum(weights[order])
    at = np.searchsorted(cw, np.array(QUANTILES) / 100.0 * cw[-1], side="left")
    return {"mean": float((values * weights).sum() / cw[-1]),
            **{f"p{q}": float(v[min(int(i), v.size - 1)]) for q, i in zip(QUANTILES, at, strict=True)}}


def _stats(x: np.ndarray) -> dict[str, float]:
    if x.size == 0:
        return {"mean": 0.0, **{f"p{q}": 0.0 for q in QUANTILES}}
    ps = np.percentile(x, QUANTILES)
    return {"mean": float(x.mean()), **{f"p{q}": float(v) for q, v in zip(QUANTILES, ps, strict=True)}}


def default_requests(arrivals: Arrivals, cap: int) -> int:
    """Requests one run simulates: a burst's N; otherwise enough rounds of the batch for a steady
    window after the warm-up (bounded by MAX_REQUESTS)."""
    if arrivals.kind == "burst":
        return int(min(max(arrivals.value, 1), MAX_REQUESTS))
    if arrivals.kind == "closed":
        return int(min(max(3 * arrivals.value, 96), MAX_REQUESTS))
    return 240


def simulate(catalog: Catalog, cfg: ReplicaConfig, prompt: Lengths, output: Lengths, arrivals: Arrivals,
             prefix_cache_hit_rate: float = 0.0, seed: int = 0, n_requests: int | None = None,
             slo: RequestSlo | None = None, staggered: bool = True, *,
             requests: GivenRequests | None = None, stop: Callable[[], bool] | None = None) -> SimResult:
    """Simulate one replica (cfg: its GPUs, precision, max_num_seqs, max_num_batched_tokens) serving
    requests of these lengths arriving as `arrivals`. See the module docstring for the rules.
    `staggered` (closed loop): the users start at random times over one request's lifetime (the
    analytic model's steady state); False starts them together (a benchmark's lockstep rounds).
    `n_requests`: None = default_requests(). Same seed, same result. `requests`: replay these recorded
    requests instead of sampling (lengths capped to the KV cache; `arrivals` must be a burst, which
    measures every request). `stop`: asked every STOP_EVERY steps; when it answers True the run raises
    SimulationStopped (the planner's time budget, sizing.planning.time_budget)."""
    if requests is not None and arrivals.kind != "burst":
        raise ValueError("recorded requests are replayed with Arrivals.burst (every request measured)")
    shape = WorkloadShape(prompt.mean, output.mean, prompt.p95, output.p95, prefix_cache_hit_rate)
    c = _ctx(catalog, cfg, shape)
    max_seqs, budget_tokens, _ = _engine_limits(catalog, cfg)
    cal = catalog.calibration
    sm = c.sm
    blk = int(number("vllm_kv_block_size", catalog))
    if not c.fit.fits:
        raise ValueError(f"the model does not fit: {c.fit.reason}")
    # vLLM's hybrid KV cache manager (>= 0.10; vllm/v1/core/kv_cache_utils.py
    # _get_kv_cache_config_uniform_page_size): layers of one attention type form groups of
    # group_size = min(layers per type) layers; every group allocates from ONE pool of blocks of
    # page_size x group_size bytes; a full-attention group needs a block per blk tokens, a sliding-window
    # group only the blocks inside its window (single_type_kv_cache_manager.py SlidingWindowManager
    # .remove_skipped_blocks frees the rest: at most cdiv(window - 1, blk) + 1 blocks)
    model = cfg.model
    n_sw = len(model.sliding_window_layers) if model.sliding_window else 0
    n_full = model.num_layers - n_sw
    group = min(n_full, n_sw) if n_sw and n_full else model.num_layers
    full_groups = -(-n_full // group) if n_full else 0
    sw_groups = -(-n_sw // group) if n_sw else 0
    win_blocks = -(-(int(model.sliding_window or 0) - 1) // blk) + 1 if n_sw else 0
    block_bytes = c.fit.kv_cache_bytes_per_token / model.num_layers * group * blk
    if model.is_hybrid:
        # hybrid linear attention (the hybrid section of sizing.perf.memory): pool blocks of blk tokens (sized
        # so a page holds a state) for the attention groups, and one block per state group held for the
        # sequence's whole life (a "window" of one block); vLLM's layout, used for every engine here
        kvb = c.fit.kv_cache_bytes_per_token / kv_cache_bytes_per_token(model, 1.0) / kv_replication_factor(
            model, cfg.tp)
        blk, full_groups, sw_groups, block_bytes = vllm_pool_blocks(model, kvb, cfg.tp, blk)
        win_blocks = 1
    total_blocks = int(c.fit.kv_cache_gib_available * GIB // block_bytes)
    rng = np.random.default_rng(seed)
    n = (requests.send_s.size if requests is not None else 0) or n_requests or default_requests(arrivals, max_seqs)
    # longest sequence the engine accepts: the KV cache (and max_model_len ~ prompt p95 + output p95)
    max_len = max(2, min((total_blocks - sw_groups * win_blocks) // max(full_groups, 1) * blk,
                         c.fit.context_tokens))
    P = prompt.sample(rng, n, max_len - 1)
    OUT = np.minimum(output.sample(rng, n, max_len - 1), max_len - P)
    OUT = np.maximum(OUT, 1)
    hit = min(max(prefix_cache_hit_rate, 0.0), 0.999)
    # prefix-cache hits: whole blocks of a shared prefix, resident once (its blocks are not per request)
    H = (np.floor(P * hit / blk) * blk).astype(np.int64)
    if requests is not None:
        P = np.clip(requests.prompt_tokens.astype(np.int64), 1, max_len - 1)
        OUT = np.maximum(np.minimum(requests.output_tokens.astype(np.int64), max_len - P), 1)
        H = (np.minimum(requests.prefix_hit_tokens.astype(np.int64), P) // blk) * blk
    H = np.minimum(H, ((P - 1) // blk) * blk)
    # a sampled run's hits are one shared prefix (a system prompt), resident once; a replay's hits are each
    # request's own history, held as its own blocks (KvBlocks.hits_shared)
    shared_blocks = int(H.max() // blk) * max(full_groups, 1) if n and requests is None else 0
    # vLLM's BlockPool keeps one block out of use: "self.null_block = self.free_block_queue.popleft()"
    # (vllm/v1/core/block_pool.py); the shared prefix's blocks are resident once
    pool = KvPool(total_blocks - 1 - shared_blocks, caching=not sw_groups)
    if requests is not None:  # a recorded trace's hits are what the engine found: cached from the start
        pool.prefix_cached = int(H.max()) if n else 0
    overhead = c.request_overhead_s
    frontend = cal.v("frontend_ms_per_request") / 1e3

    send = np.zeros(n)  # client send time
    if arrivals.kind == "poisson":
        send = np.cumsum(rng.exponential(1.0 / max(arrivals.value, 1e-12), n))
        send -= send[0]
    if requests is not None:
        send = requests.send_s.astype(float).copy()
    n_users = int(arrivals.value) if arrivals.kind == "closed" else 0
    arrive = np.full(n, math.inf)  # engine arrival
    last_handoff = -math.inf
    # sends not yet handed to the engine (a heap by send time: closed loops add to it as requests
    # finish) and hand-offs not yet arrived (in order: the API server hands off one after another)
    sends: list[tuple[float, int]] = []
    inflight: deque[tuple[float, int]] = deque()

    def hand_off(t_now: float) -> None:
        nonlocal last_handoff
        while sends and sends[0][0] <= t_now + 1e-12:
            t_send, i = heapq.heappop(sends)
            last_handoff = max(t_send + overhead, last_handoff + frontend)
            arrive[i] = last_handoff
            inflight.append((last_handoff, i))

    def next_arrival_s() -> float:
        return min(inflight[0][0] if inflight else math.inf, sends[0][0] + overhead if sends else math.inf)

    if arrivals.kind == "closed":
        issued = min(n_users, n)
        # staggered: the users' first requests spread over one request's lifetime (a steady state
        # with random phases); otherwise all start at t = 0 and fixed lengths keep them in lockstep
        span = ((c.decode_steps * sm.step_s(float(issued), c.mean_decode_context) + c.request_overhead_s)
                if staggered else 0.0)
        starts = np.sort(rng.uniform(0.0, span, issued)) if span > 0 else np.zeros(issued)
        sends = [(float(t0), i) for i, t0 in enumerate(starts)]
    else:
        issued = n
        sends = [(float(send[i]), i) for i in range(n)]
    send[:issued] = [x for x, _ in sends]
    heapq.heapify(sends)

    C = np.zeros(n, dtype=np.int64)  # tokens in the KV cache (computed)
    G = np.zeros(n, dtype=np.int64)  # output tokens sampled
    B = np.zeros(n, dtype=np.int64)  # own (non-shared) blocks held
    T1 = np.full(n, math.nan)
    T2 = np.full(n, math.nan)
    LT = np.zeros(n)  # time of the last token
    running = np.zeros(0, dtype=np.int64)
    waiting: deque[int] = deque()
    gap_v: list[np.ndarray] = []
    gap_w: list[np.ndarray] = []
    gap_r: list[np.ndarray] = []  # the request of each gap entry (per-class ITL over tokens in a replay)
    log_t: list[float] = []
    log_tok: list[int] = []
    busy_running = 0.0
    t = 0.0
    preemptions = steps = iterations = 0
    max_running = 0
    done = 0
    stable = True

    blocks_for = KvBlocks(blk, full_groups, sw_groups, win_blocks, hits_shared=requests is None)
    # async scheduling (vLLM's default on GPUs): the engine schedules step N+1 before it processes step N's
    # output, so a request finished in step N keeps its slot and blocks through that schedule
    # (bench/sched_check.py --async checks this against vLLM's AsyncScheduler)
    lag = bool(sm.async_scheduling)
    pending = _NONE

    while done < n:
        iterations += 1
        if stop is not None and iterations % STOP_EVERY == 0 and stop():
            raise SimulationStopped(f"stopped after {iterations:,} steps")
        if iterations > MAX_ITERATIONS:
            stable = False
            break
        hand_off(t)
        while inflight and inflight[0][0] <= t + 1e-12:
            waiting.append(inflight.popleft()[1])
        t_next = next_arrival_s()
        if running.size == 0 and not waiting:
            if math.isfinite(t_next):
                t = t_next
                continue
            break
        if pending.size and running.size == pending.size and not waiting:  # nothing to schedule beside them
            running = release(pending, running[:0], running, [], waiting, C, H, B, pool, blk)
            pending = _NONE
            continue
        plan = schedule_step(P, G, C, B, H, running, waiting, pool, budget_tokens, max_seqs, blocks_for,
                             OUT if lag else None)
        R, sched = plan.running, plan.sched
        if pending.size:  # their last outputs processed after this schedule (async scheduling)
            keep = G[R] < OUT[R]
            R = release(pending, keep, R, plan.preempted, waiting, C, H, B, pool, blk)
            sched = sched[keep]
            pending = _NONE
        preemptions += len(plan.preempted)
        preempted = bool(plan.preempted)
        CR, GR = C[R], G[R]
        need = P[R] + GR - CR
        running = R
        if running.size == 0:  # nothing fits (cannot happen once lengths are capped); wait for an arrival
            if math.isfinite(t_next):
                t = max(t, t_next)
                continue
            stable = False
            break
        max_running = max(max_running, int(running.size))
        act = sched > 0
        is_dec = (sched == 1) & (need == 1) & (GR >= 1)
        dec = running[is_dec]
        chunk = act & ~is_dec
        dec_ctx = CR[is_dec].astype(float)
        # decode-only run: advance k steps at once while nothing else can change
        k = 1
        # (a waiting request left after admission stays blocked until a finish frees a slot or blocks)
        if dec.size == running.size and not preempted:
            k = int((OUT[dec] - GR).min())
            if k > 1 and math.isfinite(t_next) and running.size < max_seqs:
                dt0 = _step_time(sm, dec_ctx, _EMPTY, _EMPTY)
                k = min(k, max(1, math.ceil((t_next - t) / dt0 - 1e-9)))
            # blocks the k steps need: every sequence crossing a block boundary takes one more
            if k > 1:
                extra = int((blocks_for(C[dec] + k, H[dec]) - B[dec]).sum())
                while k > 1 and extra > pool.free:
                    k = max(1, k // 2)
                    extra = int((blocks_for(C[dec] + k, H[dec]) - B[dec]).sum())
                pool.take(extra)
                B[dec] += blocks_for(C[dec] + k, H[dec]) - B[dec]
            k = max(1, min(k, 4096))
        if k > 1:
            dt = _step_time(sm, dec_ctx + (k - 1) / 2.0, _EMPTY, _EMPTY)
            t_end = t + k * dt
            first = t + dt - LT[dec]
            gap_v.extend((first, np.full(dec.size, dt)))
            gap_w.extend((np.ones(dec.size, dtype=np.int64), np.full(dec.size, k - 1, dtype=np.int64)))
            gap_r.extend((dec, dec))
            C[dec] += k
            G[dec] += k
            LT[dec] = t_end
            steps += k
            busy_running += running.size * k * dt
            log_t.append(t_end)
            log_tok.append(int(dec.size * k))
        else:
            dt = _step_time(sm, dec_ctx, sched[chunk].astype(float), CR[chunk].astype(float))
            t_end = t + dt
            C[running] = CR + sched
            sampled = running[act & (sched == need)]
            G[sampled] += 1
            again = sampled[G[sampled] >= 2]
            if again.size:
                gap_v.append(t_end - LT[again])
                gap_w.append(np.ones(again.size, dtype=np.int64))
                gap_r.append(again)
            newly = sampled[G[sampled] == 1]
            T1[newly] = t_end
            LT[sampled] = t_end
            steps += 1
            busy_running += running.size * dt
            log_t.append(t_end)
            log_tok.append(int(sampled.size))
        t = t_end
        fin_mask = G[running] >= OUT[running]
        fin = running[fin_mask]
        if fin.size:
            T2[fin] = t
            if lag:  # they keep their slots and blocks through the next schedule
                pending = fin
            else:
                running = release(fin, ~fin_mask, running, [], waiting, C, H, B, pool, blk)
            done += int(fin.size)
            if arrivals.kind == "closed":
                for _ in range(int(fin.size)):
                    if issued < n:
                        heapq.heappush(sends, (t, issued))
                        send[issued] = t
                        issued += 1
    _LAST_ITERATIONS[0] = iterations
    res = _result(arrivals, P, OUT, send, arrive, T1, T2, gap_v, gap_w, log_t, log_tok, preemptions, steps,
                  busy_running, t, max_running, total_blocks, stable, slo, n_users)
    if requests is None:
        return res
    # every inter-token gap (s) with its weight (tokens it spans the same way) and its request, so a replay
    # takes each class's ITL percentiles over its tokens
    return replace(res, per_request={"send_s": send, "first_token_s": T1, "last_token_s": T2,
                                     "prompt_tokens": P, "output_tokens": OUT, "prefix_hit_tokens": H,
                                     "gap_s": np.concatenate(gap_v) if gap_v else np.zeros(0),
                                     "gap_weight": np.concatenate(gap_w) if gap_w else np.zeros(0, dtype=np.int64),
                                     "gap_request": np.concatenate(gap_r) if gap_r else np.zeros(0, dtype=np.int64)})


_EMPTY = np.zeros(0)
_NONE = np.zeros(0, dtype=np.int64)
_LAST_ITERATIONS = [0]  # scheduler iterations of the last run (bench/sim_speed.py)


def _window(arrivals: Arrivals, n: int, n_users: int) -> tuple[int, int]:
    """Requests measured: all of a burst; else after the warm-up and before the drain."""
    if arrivals.kind == "burst":
        return 0, n
    if arrivals.kind == "closed":
        lo = min(n_users, n // 4)
        return lo, max(lo + 1, n - n_users)
    return n // 10, max(n // 10 + 1, n - n // 10)


def _result(arrivals: Arrivals, P: np.ndarray, OUT: np.ndarray, send: np.ndarray, arrive: np.ndarray,
            T1: np.ndarray, T2: np.ndarray, gap_v: list[np.ndarray], gap_w: list[np.ndarray], log_t: list[float],
            log_tok: list[int], preemptions: int, steps: int, busy_running: float, t: float, max_running: int,
            total_blocks: int, stable: bool, slo: RequestSlo | None, n_users: int) -> SimResult:
    n = P.size
    lo, hi = _window(arrivals, n, n_users)
    idx = np.arange(lo, hi)
    idx = idx[np.isfinite(T2[idx])]
    if idx.size == 0:
        inf = {"mean": math.inf, **{f"p{q}": math.inf for q in QUANTILES}}
        return SimResult(0, inf, inf, inf, inf, 0.0, 0.0, 0.0, 0.0, preemptions, steps, 0.0, max_running,
                         total_blocks, False, ["no request finished"])
    ttft = (T1[idx] - send[idx]) * 1e3
    e2e = (T2[idx] - send[idx]) * 1e3
    multi = idx[OUT[idx] > 1]
    tpot = (T2[multi] - T1[multi]) / (OUT[multi] - 1) * 1e3
    gv = np.concatenate(gap_v) * 1e3 if gap_v else np.zeros(0)
    gw = np.concatenate(gap_w) if gap_w else np.zeros(0, dtype=np.int64)
    itl = weighted_quantiles(gv, gw)
    lt, ltok = np.array(log_t), np.array(log_tok)
    if arrivals.kind == "burst":
        t0, t1 = 0.0, t
    else:
        t0, t1 = float(send[idx[0]]), float(np.nanmax(T2[idx]))
    span = max(t1 - t0, 1e-12)
    out_tps = float(ltok[(lt > t0) & (lt <= t1)].sum()) / span
    mean_out = float(OUT[idx].mean())
    rps = out_tps / mean_out  # requests completed per second (a count over the window would miss the edges)
    ok = np.ones(idx.size, dtype=bool)
    if slo is not None:
        if slo.ttft_ms is not None:
            ok &= ttft <= slo.ttft_ms
        if slo.e2e_ms is not None:
            ok &= e2e <= slo.e2e_ms
        if slo.tpot_ms is not None:
            tp_all = np.where(OUT[idx] > 1, (T2[idx] - T1[idx]) / np.maximum(OUT[idx] - 1, 1) * 1e3, 0.0)
            ok &= tp_all <= slo.tpot_ms
    good = rps * float(ok.mean())
    return SimResult(
        requests=int(idx.size), ttft_ms=_stats(ttft), itl_ms=itl, tpot_ms=_stats(tpot), e2e_ms=_stats(e2e),
        output_tokens_per_s=out_tps, requests_per_s=rps, goodput_requests_per_s=good,
        goodput_output_tokens_per_s=out_tps * float(OUT[idx][ok].sum()) / float(OUT[idx].sum()),
        preemptions=preemptions, steps=steps, mean_running=busy_running / max(t, 1e-12), max_running=max_running,
        kv_blocks=total_blocks, stable=stable and (arrivals.kind != "poisson" or rps > 0))
