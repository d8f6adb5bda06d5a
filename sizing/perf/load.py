"""Serving performance of one model replica under continuous batching: closed loop, open loop,
offline, and goodput at a p95 SLO.

Owns the public performance API (ReplicaConfig, WorkloadShape, LoadEstimate, Goodput and the
estimate_* / goodput functions). Step physics lives in sizing.perf.step, fitted constants in
sizing.catalog.calibration. Must not import pulumi, boto3, numpy, or the planner/CLI.

Method (analytic, no simulation; one estimate takes tens of microseconds):
- A *cycle* advances every decoding sequence by one token. In steady state the other batch - 1
  running requests bring prompt/output prompt tokens each of prefill work per cycle (a request's
  own prefill is in its TTFT, never in its ITL), as whole chunks of max_num_batched_tokens in some
  steps (a mixture of decode-only and chunk-carrying steps) or, beyond one chunk per step, in every
  step; mean ITL = cycle time.
- When requests wait (offline, a burst, a closed loop over the limit) the decode batch is the
  engine limit or, when prefill fills the token budget first, budget × output / (prompt + output).
- ITL percentile q: the chunk-carrying step once its share of gaps passes 1 - q (smoothed); TPOT
  percentiles over requests: a Poisson count of chunked steps per request.
- TTFT = fixed per-request cost (HTTP, tokenization, scheduling) + prefill service time S (own
  prompt, in chunks beside the running decodes) + M/G/1 queueing for the prefill server
  (Pollaczek–Khinchine mean; percentiles from the exponential tail P(W > t) ≈ ρ·exp(-ρt/E[W])) +
  half a step of residual; closed loops beyond the batch limit add the admission-queue wait from
  Little's law; lockstep closed loops and bursts of N prompts (estimate_burst: fill, slot-paced
  admission, drain of the longest outputs, API-server pacing) are modelled as such.
- Closed loop: λ solves λ = N / E2E(λ). Open loop: the active batch B solves B = R·T(B).
Units: ms for latencies, tokens/s and requests/s for throughput, whole replica unless named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import TYPE_CHECKING

from sizing.errors import CatalogLookupError
from sizing.perf.memory import (
    GIB,
    MemoryFit,
    kv_cache_bytes_per_sequence,
    kv_cache_bytes_per_token,
    kv_replication_factor,
    memory_fit,
    sequence_bytes_per_replica,
    state_bytes_per_sequence,
)
from sizing.perf.replica import ReplicaConfig
from sizing.perf.spec_decode import acceptance_length, draft_passes, spec_max_running
from sizing.perf.step import StepModel, build_step_model, overlap

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.spec import WorkloadSpec

P95_Z = 1.645  # standard-normal 95th percentile, for a prompt-length cv from (mean, p95)
Z = {0.5: 0.0, 0.9: 1.2816, 0.95: 1.6449, 0.99: 2.3263}  # standard-normal quantiles
TAIL = 0.05  # the p95's tail mass
_STD_NORMAL = NormalDist()
BURST_RANKS = 64  # ranks a burst's mean TTFT averages over (midpoint rule)
BATCH_TOLERANCE = 1e-6  # running sequences: where an open loop's batch B = R x (TTFT + decode time) is solved to
# How sharply an ITL percentile switches to the prefill-carrying step as their share of steps nears
# the tail mass (1 - q). A pooled percentile over all gaps is a step function of that share; the
# ramp keeps it continuous and monotone for the goodput bisection.
P95_RAMP_EXPONENT = 6


@dataclass(frozen=True)
class WorkloadShape:
    """Token lengths per request (means, optional p95) and the prefix-cache hit rate (0..1)."""

    prompt_tokens: float
    output_tokens: float
    prompt_tokens_p95: float | None = None
    output_tokens_p95: float | None = None
    prefix_cache_hit_rate: float = 0.0

    @classmethod
    def from_spec(cls, w: WorkloadSpec) -> WorkloadShape:
        return cls(prompt_tokens=float(w.prompt_tokens.mean), output_tokens=float(w.output_tokens.mean),
                   prompt_tokens_p95=float(w.prompt_tokens.p95) if w.prompt_tokens.p95 else None,
                   output_tokens_p95=float(w.output_tokens.p95) if w.output_tokens.p95 else None,
                   prefix_cache_hit_rate=w.prefix_cache_hit_rate)


@dataclass(frozen=True)
class LoadEstimate:
    """Steady state of one replica at a load. Throughputs are whole replica; latencies in ms;
    `ttft_ms` is inf when an open-loop rate exceeds capacity (stable False). Percentile fields:
    TTFT over requests, ITL over all token gaps, TPOT over requests' mean gaps (ms)."""

    concurrency: float
    requests_per_s: float
    output_tokens_per_s: float
    ttft_ms: float
    ttft_p95_ms: float
    itl_ms: float
    itl_p95_ms: float
    e2e_latency_ms: float
    decode_step_ms: float
    bound: str
    max_concurrent_sequences: int
    stable: bool
    explanation: str
    ttft_p50_ms: float = 0.0
    ttft_p99_ms: float = 0.0
    itl_p50_ms: float = 0.0
    itl_p99_ms: float = 0.0
    tpot_p50_ms: float = 0.0
    tpot_p95_ms: float = 0.0
    tpot_p99_ms: float = 0.0
    e2e_p50_ms: float = 0.0
    e2e_p95_ms: float = 0.0
    e2e_p99_ms: float = 0.0
    tpot_ms: float = 0.0  # mean over requests of their mean gap; 0: equal to itl_ms (pooled gaps)

    def percentile(self, metric: str, q: str) -> float:
        """metric ttft | itl | tpot | e2e; q mean | p50 | p90 | p95 | p99 (ms). TPOT's mean is the ITL
        mean; p90 lies between p50 and p95 at the normal quantiles' ratio (z0.90 / z0.95 = 0.779)."""
        if q == "p90":
            lo, hi = self.percentile(metric, "p50"), self.percentile(metric, "p95")
            return lo + (hi - lo) * Z[0.9] / Z[0.95]
        if q == "mean":
            return {"ttft": self.ttft_ms, "itl": self.itl_ms, "tpot": self.tpot_ms or self.itl_ms,
                    "e2e": self.e2e_latency_ms}[metric]
        if metric == "itl" and q == "p95":
            return self.itl_p95_ms
        if metric == "ttft" and q == "p95":
            return self.ttft_p95_ms
        return float(getattr(self, f"{metric}_{q}_ms"))


@dataclass(frozen=True)
class Goodput:
    """The largest load per replica that meets both p95 targets and the memory limit (output tokens/s
    and requests/s per replica)."""

    feasible: bool
    output_tokens_per_s: float
    requests_per_s: float
    concurrency: float
    at: LoadEstimate | None
    reason: str
    reason_code: str = ""
    # p10-p90 range of the goodput from the model's held-out (leave-one-source-out) throughput error
    output_tokens_per_s_p10: float = 0.0
    output_tokens_per_s_p90: float = 0.0


@dataclass(frozen=True)
class _Ctx:
    """Everything about one (config, shape) that does not depend on the load."""

    sm: StepModel
    fit: MemoryFit
    max_running: int  # sequences per replica in one step at most: min(max_num_seqs, KV capacity)
    max_running_reason: str  # "kv-capacity" | "engine-limit"
    budget: float  # max_num_batched_tokens
    prefill_tokens: float  # prompt tokens that need compute (prefix-cache misses)
    prefill_tokens_p95: float
    cached_tokens: float
    decode_steps: float  # decode steps per request (output - 1, at least 1)
    decode_steps_p95: float  # decode steps of the longest requests (output p95 - 1), for a burst's drain
    mean_decode_context: float  # mean context a decoding sequence attends over
    cv2_service: float
    prompt_sigma: float  # log-normal sigma of prompt lengths (from mean and p95: lognormal_sigma)
    request_overhead_s: float
    frontend_s_per_request: float  # the API server's ingest time per prompt, s
    bandwidth_fraction: float  # achieved share of the GPU's datasheet memory bandwidth (0..1)
    cv2_arrival: float = 1.0  # squared coefficient of variation of inter-arrival times: 1 Poisson, 0 uniform
    prefill_only_steps: bool = False  # ReplicaConfig.prefill_only_steps: no decode while prompts wait
    vllm_v1_queue: bool = False  # lockstep groups queue FCFS behind each other (_lockstep_queue_s): vLLM
    memo: dict[tuple[str, object], object] = field(default_factory=dict, compare=False, repr=False)


def lognormal_sigma(mean: float, p95: float) -> float:
    """Sigma of the log-normal with this mean and 95th percentile: ln(p95/mean) = 1.645σ - σ²/2
    (the smaller root). p95/mean beyond exp(1.645²/2) ≈ 3.87 has no solution; σ is capped at 1.645."""
    r = math.log(max(p95 / mean, 1.0))
    disc = P95_Z * P95_Z - 2.0 * r
    return P95_Z - math.sqrt(disc) if disc > 0 else P95_Z


def _engine_limits(catalog: Catalog, cfg: ReplicaConfig) -> tuple[int, int, str]:
    try:
        eng = catalog.engine(cfg.engine)
        mem_engine = cfg.engine
    except CatalogLookupError:  # a calibration-only engine (e.g. tgi) sizes memory like vLLM
        catalog.calibration.engine_eff(cfg.engine)
        eng, mem_engine = catalog.engine("vllm"), "vllm"
    return (cfg.max_num_seqs or spec_max_running(cfg.engine, cfg.spec) or eng.default_max_num_seqs,
            cfg.max_num_batched_tokens or eng.default_max_num_batched_tokens, mem_engine)


_CTX_CACHE: dict[tuple[int, ReplicaConfig, WorkloadShape], tuple[Catalog, _Ctx]] = {}
_FIT_CACHE: dict[tuple[int, ReplicaConfig, int], tuple[Catalog, MemoryFit, int, int]] = {}


def clear_caches() -> None:
    """Forget cached per-config constants (after the calibration changes). Memory fits do not
    depend on the calibration and stay cached."""
    _CTX_CACHE.clear()


def _state_pool_cap(cache_bytes: float, per_seq: float, state: float, ratio: float, per_running: int) -> int:
    """Sequences a hybrid model runs at once on an engine that splits `cache_bytes` (the replica's memory
    for caches) into a state pool and an attention KV pool in `ratio` (states : KV) and admits at most
    one running request per `per_running` states (engine_state_pool.csv, SGLang's mamba_full_memory_ratio
    and MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO): min(state pool / state / per_running, KV pool / the
    KV of one sequence of `per_seq` bytes less its state)."""
    if state <= 0:
        return int(cache_bytes / per_seq) if per_seq > 0 else 0
    states = int(cache_bytes * ratio / (1.0 + ratio) / state) // per_running
    kv = per_seq - state
    return min(states, int(cache_bytes / (1.0 + ratio) / kv)) if kv > 0 else states


def _ctx(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape) -> _Ctx:
    """Cached per (catalog object, config, shape); the planner asks for the same ones many times."""
    key = (id(catalog), cfg, shape)
    hit = _CTX_CACHE.get(key)
    if hit is not None and hit[0] is catalog:
        return hit[1]
    if len(_CTX_CACHE) > 4096:
        _CTX_CACHE.clear()
    c = _build_ctx(catalog, cfg, shape)
    _CTX_CACHE[key] = (catalog, c)
    return c


def _memory(catalog: Catalog, cfg: ReplicaConfig, full_tokens: int) -> tuple[MemoryFit, int, int]:
    key = (id(catalog), cfg, full_tokens)
    hit = _FIT_CACHE.get(key)
    if hit is not None and hit[0] is catalog:
        return hit[1], hit[2], hit[3]
    if len(_FIT_CACHE) > 8192:
        _FIT_CACHE.clear()
    max_seqs, budget, mem_engine = _engine_limits(catalog, cfg)
    fit = memory_fit(catalog, replace(cfg, engine=mem_engine), full_tokens)
    _FIT_CACHE[key] = (catalog, fit, max_seqs, budget)
    return fit, max_seqs, budget


def _build_ctx(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape) -> _Ctx:
    cal = catalog.calibration
    gpu = catalog.gpu(cfg.gpu)
    link = cfg.interconnect or ("nvlink" if gpu.nvlink_bandwidth_gbs else "pcie")
    sm = build_step_model(catalog, cal, cfg.model, cfg.gpu, cfg.precision, cfg.tp, cfg.pp,
                          cfg.kv_cache_dtype, cfg.engine, link, cfg.cuda_graphs, cfg.async_scheduling,
                          cfg.awq_marlin, cfg.fabric_gbps,
                          catalog.engine_kernels_per_layer(cfg.engine, cfg.engine_version, cfg.model),
                          cfg.spec.num_tokens if cfg.spec else 0,
                          acceptance_length(catalog, cfg.model, cfg.spec) if cfg.spec else 1.0,
                          draft_passes(cfg.engine, cfg.spec) if cfg.spec else 0,
                          catalog.cuda_graph_max_batch(cfg.engine, cfg.engine_version, gpu.memory_gib, cfg.tp))
    full_tokens = int(math.ceil((shape.prompt_tokens_p95 or shape.prompt_tokens)
                                + (shape.output_tokens_p95 or shape.output_tokens)))
    fit, max_seqs, budget = _memory(catalog, cfg, full_tokens)
    # steady state: running sequences are spread evenly over their decode, so one holds on average
    # prompt + output/2 tokens of paged KV cache (a full-length one must still fit: `fit.fits`)
    # prefix-cache hits share their KV blocks between sequences, so only the misses count per sequence.
    # With long-tailed outputs a running slot is held by each request for its output length, so the
    # running set is length-biased (renewal-reward): a slot holds on average E[o·(p + o/2)] / E[o] =
    # p + E[o²] / (2 E[o]) = p + mean·exp(σ²) / 2 for log-normal outputs (σ from mean and p95)
    hit_share = min(max(shape.prefix_cache_hit_rate, 0.0), 0.999)
    out_sigma = lognormal_sigma(shape.output_tokens, shape.output_tokens_p95) if shape.output_tokens_p95 else 0.0
    avg_tokens = shape.prompt_tokens * (1 - hit_share) + _held_output_tokens(catalog, cfg, shape.output_tokens,
                                                                             out_sigma)
    # sliding-window layers hold at most their window of each sequence (vLLM >= 0.10's hybrid KV cache
    # manager frees blocks that left the window: vllm/v1/core/single_type_kv_cache_manager.py
    # SlidingWindowManager.remove_skipped_blocks), as memory_fit counts them
    per_seq = kv_cache_bytes_per_sequence(cfg.model, avg_tokens, 1.0) * fit.kv_cache_bytes_per_token \
        / kv_cache_bytes_per_token(cfg.model, 1.0)
    if cfg.model.is_hybrid:  # a constant state per sequence beside the KV of its attention layers, laid out
        # as the engine pages them (as memory_fit counts them)
        per_seq = sequence_bytes_per_replica(cfg.model, avg_tokens, fit.kv_cache_bytes_per_token
                                             / kv_cache_bytes_per_token(cfg.model, 1.0)
                                             / kv_replication_factor(cfg.model, cfg.tp), cfg.tp, cfg.engine,
                                             int(catalog.number("vllm_kv_block_size")))
    kv_cap = int(fit.kv_cache_gib_available * GIB / per_seq) if fit.fits else 0
    if cfg.model.is_hybrid and fit.fits and (pool := catalog.engine_state_pool(cfg.engine, cfg.engine_version)):
        kv_cap = min(kv_cap, _state_pool_cap(fit.kv_cache_gib_available * GIB, per_seq,
                                             state_bytes_per_sequence(cfg.model), *pool))
    cap, why = (kv_cap, "kv-capacity") if kv_cap < max_seqs else (max_seqs, "engine-limit")
    hit = min(max(shape.prefix_cache_hit_rate, 0.0), 0.999)
    isl_p95 = shape.prompt_tokens_p95 or shape.prompt_tokens
    cv = max(isl_p95 / shape.prompt_tokens - 1.0, 0.0) / P95_Z if shape.prompt_tokens > 0 else 0.0
    # the prompts' log-normal from their mean and p95, as the outputs' (_decode_steps_q): its median is
    # mean·exp(-σ²/2), below the mean (_prompt_q)
    sigma = lognormal_sigma(shape.prompt_tokens, isl_p95) if shape.prompt_tokens > 0 else 0.0
    return _Ctx(sm=sm, fit=fit, max_running=cap, max_running_reason=why, budget=float(budget),
                prefill_tokens=shape.prompt_tokens * (1 - hit), prefill_tokens_p95=isl_p95 * (1 - hit),
                cached_tokens=shape.prompt_tokens * hit, decode_steps=max(shape.output_tokens - 1.0, 1.0),
                decode_steps_p95=max((shape.output_tokens_p95 or shape.output_tokens) - 1.0, 1.0),
                mean_decode_context=shape.prompt_tokens + shape.output_tokens / 2.0, cv2_service=cv * cv,
                prompt_sigma=sigma, request_overhead_s=cal.v("request_overhead_ms") / 1e3,
                frontend_s_per_request=cal.v("frontend_ms_per_request") / 1e3,
                bandwidth_fraction=sm.bw_bytes_per_s / (sm.peak_bandwidth_gbs * 1e9),
                prefill_only_steps=cfg.prefill_only_steps, vllm_v1_queue=cfg.engine == "vllm")


def _held_output_tokens(catalog: Catalog, cfg: ReplicaConfig, output_mean: float, out_sigma: float) -> float:
    """Output tokens of KV a running slot holds on average (tokens; length-biased over log-normal
    outputs of mean `output_mean` and log-sigma `out_sigma`). Engines that allocate blocks as tokens
    arrive (vLLM, SGLang) hold E[o²] / (2 E[o]) = mean·exp(σ²) / 2; an engine that admits a request only
    when its blocks to completion are free (TensorRT-LLM's GUARANTEED_NO_EVICT, engines.csv
    kv_reserved_to_completion) holds the whole output from admission on: E[o²] / E[o] = mean·exp(σ²)."""
    length_biased = output_mean * math.exp(out_sigma ** 2)
    try:
        reserved = catalog.engine(cfg.engine).kv_reserved_to_completion
    except CatalogLookupError:  # a calibration-only engine (e.g. tgi) is sized like vLLM (_engine_limits)
        reserved = False
    return length_biased if reserved else length_biased / 2


def _saturated_batch(c: _Ctx) -> float:
    """Decoding sequences when requests wait (offline, a burst, a closed loop over the limit): the
    batch limit, or fewer when prefill fills the token budget first. The engine schedules running
    decodes first and prefills in what is left of max_num_batched_tokens, so in steady state the
    prefill completion rate (budget - B) / prompt per step equals the decode completion rate
    B / output: B = budget × output / (prompt + output). Under speculative decoding each running
    sequence takes k + 1 tokens of the budget a step and advances `acc` tokens (vLLM's scheduler counts
    `num_tokens_with_spec` against the budget; sizing.perf.spec_decode): (budget - B(k + 1)) / prompt =
    B·acc / output, so B = budget × output / ((k + 1) · output + acc · prompt)."""
    q, acc = c.sm.spec_tokens + 1.0, c.sm.spec_accept_len
    return max(1.0, min(float(c.max_running),
                        c.budget * c.decode_steps / (acc * c.prefill_tokens + q * c.decode_steps)))


# --- step-level quantities (seconds) ---------------------------------------------------------
def _others_prefill(c: _Ctx, batch: float) -> float:
    """Prompt tokens per decode step that the other batch - 1 running requests bring: a request's
    own prefill happens before its first token (in TTFT), never inside its ITL."""
    return max(batch - 1.0, 0.0) * c.prefill_tokens / c.decode_steps


def _memo(name: str):  # type: ignore[no-untyped-def]
    """Per-context memo of a (ctx, float) -> value function (the goodput search asks again and again)."""
    def wrap(fn):  # type: ignore[no-untyped-def]
        def inner(c: _Ctx, x: float):  # type: ignore[no-untyped-def]
            key = (name, x)
            hit = c.memo.get(key)
            if hit is None:
                if len(c.memo) > 20000:
                    c.memo.clear()
                hit = c.memo[key] = fn(c, x)
            return hit
        inner.__doc__ = fn.__doc__
        return inner
    return wrap


@_memo("cycle")
def _cycle_s(c: _Ctx, batch: float) -> float:
    """Mean ITL: time to advance `batch` decoding sequences one token, with the others' prefill.
    While the others' prefill is less than one chunk per step, it arrives as whole chunks in some
    steps (a mixture of decode-only and chunk-carrying steps: an MoE's chunk touches all experts
    once, not in every step); beyond that every step carries prefill and the work is spread over
    budget-sized steps."""
    p = _others_prefill(c, batch)
    ch = _chunk(c, batch, c.prefill_tokens)
    if p <= ch and ch > 0:
        decode = c.sm.step_s(batch, c.mean_decode_context)
        with_chunk = c.sm.step_s(batch, c.mean_decode_context, ch, c.cached_tokens + c.prefill_tokens / 2)
        return decode + (p / ch) * (with_chunk - decode)
    n = max(1.0, (batch + p) / c.budget)
    return c.sm.step_s(batch, c.mean_decode_context, p, c.cached_tokens + c.prefill_tokens / 2, n_steps=n)


def _chunk(c: _Ctx, batch: float, prompt: float) -> float:
    return max(min(prompt, c.budget - batch), min(prompt, c.budget / 16))


@_memo("itl_steps")
def _itl_steps(c: _Ctx, batch: float) -> tuple[float, float, float]:
    """(decode-only step s, prefill-carrying step s, share of a request's gaps that carry a chunk)."""
    decode = c.sm.step_s(batch, c.mean_decode_context)
    ch = _chunk(c, batch, c.prefill_tokens_p95)
    chunked = c.sm.step_s(batch, c.mean_decode_context, ch, c.cached_tokens + c.prefill_tokens / 2)
    share = min(_others_prefill(c, batch) / ch, 1.0) if ch > 0 else 0.0
    return decode, chunked, share


def _itl_q_s(c: _Ctx, batch: float, mean_s: float, q: float) -> float:
    """ITL percentile q over all gaps: the chunked step once its share passes 1 - q (smoothed below
    it by P95_RAMP_EXPONENT so that it stays continuous and monotone in the batch)."""
    decode, chunked, share = _itl_steps(c, batch)
    v = decode + (chunked - decode) * min(1.0, share / (1.0 - q)) ** P95_RAMP_EXPONENT
    return v if q <= 0.5 else max(v, mean_s)


def _tpot_q_s(c: _Ctx, batch: float, mean_s: float, q: float) -> float:
    """TPOT percentile q over requests: a request's gaps hold a Poisson number of chunked steps."""
    decode, chunked, share = _itl_steps(c, batch)
    m = share * c.decode_steps
    return max(mean_s + (chunked - decode) * Z[q] * math.sqrt(m) / c.decode_steps, mean_s if q >= 0.5 else decode)


def _prefill_s(c: _Ctx, batch: float, prompt: float) -> float:
    """Service time of one prompt's prefill, in chunks beside `batch` running decodes."""
    key = ("prefill", (batch, prompt))
    hit = c.memo.get(key)
    if hit is None:
        hit = c.memo[key] = _prefill_raw(c, batch, prompt)
    return hit  # type: ignore[return-value]


def _prefill_raw(c: _Ctx, batch: float, prompt: float) -> float:
    if prompt <= 0:
        return c.sm.wall_step_s(max(batch, 1.0), c.mean_decode_context)
    ch = _chunk(c, batch, prompt)
    # chunk k of a prompt attends over the k - 1 chunks before it: over all chunks, prompt / 2 on average;
    # each chunk waits a whole engine step (under speculative decoding: its verify and draft work too)
    return (prompt / ch) * c.sm.wall_step_s(batch, c.mean_decode_context, ch, c.cached_tokens + prompt / 2)


@_memo("busy")
def _prefill_busy_s(c: _Ctx, batch: float) -> float:
    """GPU time one prompt's prefill adds beyond the running decodes (its marginal cost): the
    prefill server's service time. The wall-clock prefill (_prefill_s) also contains decode work,
    which the decode cycle already accounts for. Taken at the largest (saturated) batch, so that
    the server's utilization grows with the arrival rate alone (an MoE's marginal prefill cost
    falls as a larger batch already touches its experts; at the low rates of small batches the
    queue is short either way)."""
    b = _saturated_batch(c)
    ch = _chunk(c, b, c.prefill_tokens)
    if ch <= 0:
        return 0.0
    with_chunk = c.sm.wall_step_s(b, c.mean_decode_context, ch, c.cached_tokens + c.prefill_tokens / 2)
    return (c.prefill_tokens / ch) * max(with_chunk - c.sm.wall_step_s(b, c.mean_decode_context), 0.0)


def _wait_q(mean: float, rho: float, q: float) -> float:
    """Percentile q of the M/G/1 wait from its mean: P(W > t) ≈ ρ·exp(-ρt/E[W])."""
    tail = 1.0 - q
    return (mean / rho) * math.log(rho / tail) if rho > tail and mean > 0 else 0.0


def _wait_s(c: _Ctx, lam: float, service: float, busy: float) -> tuple[float, float]:
    """(mean, ρ) of the G/G/1 wait for the prefill server at arrival rate `lam` (1/s): utilization
    from the marginal prefill time `busy`, each waiting request ahead costing its wall-clock `service`.
    Kingman's approximation ρ·s·(c²a + c²s) / (2(1 - ρ)): exact for Poisson arrivals (c²a = 1, the
    Pollaczek-Khinchine M/G/1 mean); c²a = 0 for arrivals at uniform intervals (a constant-rate client)."""
    rho = lam * busy
    if rho >= 1.0:
        return math.inf, rho
    return rho * service * (c.cv2_arrival + c.cv2_service) / (2.0 * (1.0 - rho)), rho


@dataclass(frozen=True)
class _Point:
    batch: float
    lam: float
    ttft_s: float
    ttft_q_s: dict[float, float]  # 0.5 / 0.95 / 0.99
    itl_s: float
    stable: bool = True


def _prompt_q(c: _Ctx, q: float) -> float:
    """Prompt tokens needing compute at percentile q: the log-normal with the prompts' mean and p95
    (mean·exp(σz - σ²/2); the median request's prompt is mean·exp(-σ²/2), ~0.65 × the mean for ShareGPT's
    assumed p95 = 3 × mean), the same law as the outputs' (_decode_steps_q); the mean for fixed lengths."""
    if q == 0.95:
        return c.prefill_tokens_p95
    s = c.prompt_sigma
    return c.prefill_tokens * math.exp(s * Z[q] - s * s / 2.0)


def _point(c: _Ctx, batch: float, lam: float, queue_s: float = 0.0) -> _Point:
    itl = _cycle_s(c, batch)
    s = _prefill_s(c, batch, c.prefill_tokens)
    w, rho = _wait_s(c, lam, s, _prefill_busy_s(c, batch))
    residual = 0.5 * c.sm.wall_step_s(batch, c.mean_decode_context) if batch > 1 else 0.0
    base = queue_s + residual + c.request_overhead_s
    if not math.isfinite(w):
        return _Point(batch, lam, math.inf, {q: math.inf for q in (0.5, 0.95, 0.99)}, itl, stable=False)
    qs = {q: base + _prefill_s(c, batch, _prompt_q(c, q)) + max(_wait_q(w, rho, q), w if q > 0.5 else 0.0)
          for q in (0.5, 0.95, 0.99)}
    return _Point(batch, lam, base + s + w, qs, itl)


def _closed(c: _Ctx, n: float) -> _Point:
    """Closed loop with n ≤ cap in flight: bisection on λ = n / E2E(λ)."""
    itl = _cycle_s(c, n)
    d = c.decode_steps * itl
    s = _prefill_s(c, n, c.prefill_tokens) + c.request_overhead_s
    busy = _prefill_busy_s(c, n)
    lo, hi = 0.0, min(n / (s + d), (1.0 - 1e-9) / busy if busy > 0 else math.inf)
    for _ in range(48):
        mid = 0.5 * (lo + hi)
        w, _ = _wait_s(c, mid, s, busy)
        if mid * (s + w + d) < n:
            lo = mid
        else:
            hi = mid
    return _point(c, n, lo)


def _bound(c: _Ctx, batch: float, capped: bool) -> tuple[str, str]:
    mem, comp, comm = c.sm.parts(batch, c.mean_decode_context, _others_prefill(c, batch))
    w_gib = c.sm.weight_gib_per_gpu
    if capped and mem >= comp:
        if c.max_running_reason == "kv-capacity":
            return "kv-capacity", (f"the KV cache holds only {c.max_running} sequences of this length, so the batch "
                                   "stays small and each step is dominated by reading weights")
        return "engine-limit", (f"the engine's max_num_seqs ({c.max_running}) caps the batch while steps are still "
                                "memory-bound")
    if comm > max(mem, comp):
        return "communication", (f"tensor-parallel all-reduces ({c.sm.allreduces_per_stage} per step over tp="
                                 f"{c.sm.tp}) take longer than the memory and compute work of a step")
    if comp > mem:
        return "compute", (f"at batch {batch:.0f} the matrix math ({comp * 1e3:.1f} ms per step) outweighs "
                           f"reading memory ({mem * 1e3:.1f} ms)")
    return "memory-bandwidth", (f"each step reads {w_gib:.1f} GiB of weights per GPU plus the KV cache at "
                                f"{c.sm.peak_bandwidth_gbs:.0f} GB/s × {c.bandwidth_fraction:.2f} efficiency "
                                f"({mem * 1e3:.1f} ms) which outweighs the math ({comp * 1e3:.1f} ms)")


def _decode_steps_q(c: _Ctx, q: float) -> float:
    """Decode steps of the request at percentile q of output length: log-normal from the mean and p95
    (long-tailed outputs such as ShareGPT's); the mean when the lengths are fixed. A request's E2E is its
    TTFT plus its own output's steps, so E2E percentiles over requests follow the output lengths (their
    median below the mean, their p95 near the p95 output)."""
    if c.decode_steps_p95 <= c.decode_steps:
        return c.decode_steps
    sig = lognormal_sigma(c.decode_steps, c.decode_steps_p95)
    return c.decode_steps * math.exp(sig * Z[q] - sig * sig / 2.0)


def _estimate(c: _Ctx, shape: WorkloadShape, pt: _Point, concurrency: float, capped: bool) -> LoadEstimate:
    e2e = pt.ttft_s + c.decode_steps * pt.itl_s
    bound, why = _bound(c, pt.batch, capped)
    b, itl = pt.batch, pt.itl_s
    tq = {q: _tpot_q_s(c, b, itl, q) for q in (0.5, 0.95, 0.99)}
    iq = {q: _itl_q_s(c, b, itl, q) for q in (0.5, 0.95, 0.99)}
    e2e_q = {q: pt.ttft_q_s[q] + _decode_steps_q(c, q) * tq[q] for q in (0.5, 0.95, 0.99)}
    return LoadEstimate(
        concurrency=concurrency, requests_per_s=pt.lam, output_tokens_per_s=pt.lam * shape.output_tokens,
        ttft_ms=pt.ttft_s * 1e3, ttft_p95_ms=pt.ttft_q_s[0.95] * 1e3, itl_ms=itl * 1e3,
        itl_p95_ms=iq[0.95] * 1e3, e2e_latency_ms=e2e * 1e3,
        decode_step_ms=c.sm.step_s(b, c.mean_decode_context) * 1e3, bound=bound,
        max_concurrent_sequences=c.max_running, stable=pt.stable, explanation=why,
        ttft_p50_ms=pt.ttft_q_s[0.5] * 1e3, ttft_p99_ms=pt.ttft_q_s[0.99] * 1e3,
        itl_p50_ms=iq[0.5] * 1e3, itl_p99_ms=iq[0.99] * 1e3, tpot_p50_ms=tq[0.5] * 1e3,
        tpot_p95_ms=tq[0.95] * 1e3, tpot_p99_ms=tq[0.99] * 1e3, e2e_p50_ms=e2e_q[0.5] * 1e3,
        e2e_p95_ms=e2e_q[0.95] * 1e3, e2e_p99_ms=e2e_q[0.99] * 1e3)


def _infeasible_estimate(c: _Ctx, concurrency: float) -> LoadEstimate:
    inf = math.inf
    return LoadEstimate(concurrency, 0.0, 0.0, inf, inf, inf, inf, inf, inf,
                        "weights-do-not-fit", 0, False, f"the model does not fit: {c.fit.reason}",
                        inf, inf, inf, inf, inf, inf, inf, inf, inf, inf)


def _shift_ttft(pt: _Point, add_s: float) -> _Point:
    return replace(pt, ttft_s=pt.ttft_s + add_s, ttft_q_s={q: v + add_s for q, v in pt.ttft_q_s.items()})


def estimate_closed_loop(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape,
                         concurrency: int, synchronized: bool = False) -> LoadEstimate:
    """`concurrency` requests always in flight (vLLM bench --max-concurrency). Beyond the batch
    limit the rest wait for admission, which adds to TTFT (Little's law).

    `synchronized`: every request has the same fixed lengths and all start together (a benchmark
    with fixed input/output lengths), so they finish together and each round is a burst of n
    prompts: the API server hands them over one after another (frontend time per request) and
    their prefills run back to back, instead of arriving at random (the M/G/1 wait)."""
    c = _ctx(catalog, cfg, shape)
    if c.max_running < 1:
        return _infeasible_estimate(c, concurrency)
    n = max(float(concurrency), 1.0)
    limit = _saturated_batch(c)
    if n <= limit:
        est = _estimate(c, shape, _closed(c, n), n, capped=False)
        return _synchronize(c, shape, est, n) if synchronized and n > 1 else est
    full = _closed(c, limit)
    e2e_active = full.ttft_s + c.decode_steps * full.itl_s
    queue = n / full.lam - e2e_active
    return _estimate(c, shape, _shift_ttft(full, queue), n, capped=True)


def _fill_frac(c: _Ctx, n: float, frac: float, per_step: float | None = None) -> float:
    """Share of the time to prefill n prompts back to back after which the prompt at rank frac·n has
    its first token: prompts finish at the end of the step that holds their last chunk (`per_step`
    prompt tokens per step; None: the whole budget)."""
    steps = max(1.0, math.ceil(n * c.prefill_tokens / (per_step or c.budget) - 1e-9))
    return min(1.0, max(math.ceil(frac * steps - 1e-9), 1.0) / steps)


def _synchronize(c: _Ctx, shape: WorkloadShape, est: LoadEstimate, n: float) -> LoadEstimate:
    """A closed loop whose n requests run in lockstep rounds: each round starts with the n prompts'
    prefill; a prompt's first token comes at the end of its step. Lockstep holds only while a
    round's prompts fit in one budget-sized step: otherwise the first round's prefill takes k steps,
    its k groups finish k different steps apart, and every later round arrives as k groups of n/k
    staggered by those steps, each prefilled beside the others' decodes (so the groups' size, not
    the users', sets the TTFT)."""
    steps = max(1.0, math.ceil(n * c.prefill_tokens / c.budget - 1e-9))
    if c.prefill_only_steps and steps > 1.0:
        return _prefill_priority_rounds(c, shape, est, n)
    g = n / steps  # requests per group
    round_s = overlap(_fill_s(c, g), g * c.frontend_s_per_request, 4.0) \
        + c.sm.step_s(n, c.mean_decode_context)
    base = c.request_overhead_s
    ttft = {q: base + round_s for q in (0.5, 0.95, 0.99)}
    mean = base + round_s
    if steps > 1.0 and c.vllm_v1_queue:
        per_group = _lockstep_queue_s(c, n, steps)
        mean = sum(per_group) / len(per_group)
        ttft = {q: per_group[min(int(q * len(per_group)), len(per_group) - 1)] for q in (0.5, 0.95, 0.99)}
        gap = _lockstep_queue_gap_s(c, n, steps)
        est = replace(est, itl_ms=gap * 1e3)
    if steps == 1.0:
        est = _lockstep_gaps(est)
    e2e = mean + c.decode_steps * est.itl_ms / 1e3
    lam = n / e2e
    itl_q = _lockstep_itl_q_s(c, n, steps, est.itl_ms / 1e3)
    return replace(est, ttft_ms=mean * 1e3, itl_p50_ms=itl_q[0.5] * 1e3, itl_p95_ms=itl_q[0.95] * 1e3,
                   itl_p99_ms=itl_q[0.99] * 1e3, ttft_p50_ms=ttft[0.5] * 1e3, ttft_p95_ms=ttft[0.95] * 1e3,
                   ttft_p99_ms=ttft[0.99] * 1e3, e2e_latency_ms=e2e * 1e3, requests_per_s=lam,
                   output_tokens_per_s=lam * shape.output_tokens,
                   e2e_p50_ms=(ttft[0.5] + c.decode_steps * est.tpot_p50_ms / 1e3) * 1e3,
                   e2e_p95_ms=(ttft[0.95] + c.decode_steps * est.tpot_p95_ms / 1e3) * 1e3,
                   e2e_p99_ms=(ttft[0.99] + c.decode_steps * est.tpot_p99_ms / 1e3) * 1e3)


def _lockstep_queue_s(c: _Ctx, n: float, groups: float) -> list[float]:
    """TTFT (s, ascending) of each of the k = `groups` lockstep groups of a synchronized closed loop
    (_synchronize), each group's n/k prompts prefilled in one step beside the others' decodes.

    The groups' first tokens come in consecutive steps, so they finish in consecutive steps too; but
    the steps a request's last token falls in are decode steps (d, the whole batch decoding), so the
    groups finish d apart, not a prefill step apart. A finished user's next request reaches the engine
    L = request overhead + its group's hand-over later, so the first group's next prompts are scheduled
    after b = ceil(L / d) decode steps, and vLLM V1's scheduler then prefills the waiting groups FCFS,
    one group's worth of the token budget per step (vllm/v1/core/sched/scheduler.py `schedule()`: the
    running decodes first, then "schedule the WAITING requests" in what is left). With step ends at
    i·d (i <= b) and b·d + (i - b)·s after (s: a group's prefill step), group j's next prompts are sent
    at the end of step j and get their first token at the end of step b + 1 + j:
    TTFT_j = (j + 1)·s + (b - j)·d for j <= b, (b + 1)·s after (the queue of b + 1 groups is full).
    sizing.perf.sim, which runs the scheduler's rules step by step, gives the same queue
    (tests/test_perf_lockstep_queue.py); before, every group waited only its own step. vLLM only: the
    scheduler quoted is vLLM's, and TensorRT-LLM's NIM row (25 users x 5,000-token prompts, 689 ms, about
    one step: tests/test_perf_structure.py) shows no such queue."""
    d, s, b, k = _queue_terms(c, n, groups)
    return sorted((j + 1) * s + (b - j) * d if j <= b else (b + 1) * s for j in range(k))


def _lockstep_queue_gap_s(c: _Ctx, n: float, groups: float) -> float:
    """Mean token gap (s) of a request in the queued lockstep groups of _lockstep_queue_s: its gaps are
    decode steps of the whole batch except the prefill steps of the groups served after it in its own
    round (k - 1 - j for group j) and, for the groups that finish inside the next round's queue
    (j > b + 1), the j - b - 1 of those served before it finishes; (k - 1) for every group when they
    stayed a prefill step apart."""
    d, s, b, k = _queue_terms(c, n, groups)
    m = sum((k - 1 - j) + max(j - b - 1, 0) for j in range(k)) / k
    return d + m * max(s - d, 0.0) / c.decode_steps


def _queue_terms(c: _Ctx, n: float, groups: float) -> tuple[float, float, int, int]:
    """(d, s, b, k) of _lockstep_queue_s and _lockstep_queue_gap_s: d the whole batch's decode step (seconds),
    s a group's prefill step beside the others' decodes (seconds), b the re-send lag in decode steps
    (_resend_steps), k the number of groups."""
    g = n / groups
    d = c.sm.step_s(n, c.mean_decode_context)
    s = c.sm.step_s(max(n - g, 1.0), c.mean_decode_context, g * c.prefill_tokens,
                    c.cached_tokens + c.prefill_tokens / 2)
    b = _resend_steps(c, n, groups)
    k = max(int(round(groups)), 1)
    return d, s, b, k


def _resend_steps(c: _Ctx, n: float, groups: float) -> int:
    """b: decode steps of the whole batch between a lockstep group's last token and the first step that
    can schedule its users' next prompts (their re-send lag: request overhead + the group's hand-over)."""
    d = c.sm.step_s(n, c.mean_decode_context)
    lag = c.request_overhead_s + n / groups * c.frontend_s_per_request
    return max(math.ceil(lag / d - 1e-9), 1) if d > 0 else 1


def _lockstep_itl_q_s(c: _Ctx, n: float, groups: float, mean_s: float) -> dict[float, float]:
    """ITL percentiles (s) of n requests in `groups` lockstep groups (_synchronize): a group's prompts are
    prefilled together in one step while the other n - n/groups decode, so a request's gaps hold
    groups - 1 prefill-carrying steps per output (each the group's whole prompt tokens), the rest decode
    steps; the same ramp as _itl_q_s between them (continuous in the share)."""
    g = n / groups
    decode = c.sm.step_s(n, c.mean_decode_context)
    chunked = c.sm.step_s(max(n - g, 1.0), c.mean_decode_context, g * c.prefill_tokens,
                          c.cached_tokens + c.prefill_tokens / 2)
    share = min((groups - 1.0) / c.decode_steps, 1.0)
    out = {}
    for q in (0.5, 0.95, 0.99):
        v = decode + (chunked - decode) * min(1.0, share / (1.0 - q)) ** P95_RAMP_EXPONENT
        out[q] = v if q <= 0.5 else max(v, mean_s)
    return out


def _prefill_priority_rounds(c: _Ctx, shape: WorkloadShape, est: LoadEstimate, n: float) -> LoadEstimate:
    """Lockstep rounds under a scheduler that never decodes while prompts wait (vLLM V0 without chunked
    prefill: "Don't schedule decodes if prefills are scheduled.", core/scheduler.py _schedule_default;
    SGLang 0.4 without --enable-mixed-chunk: get_next_batch_to_run runs a new prefill batch alone). A
    round's n prompts take k budget-sized prefill-only steps; the prompt at rank i has its first token at
    the end of its step and its second after the round's last prefill step, so all n decode together and
    finish together: the next round arrives at once, however many steps its prefill takes. TTFT over
    ranks (s); every token gap a decode step of n, except one per request that holds the rest of the
    round's prefill (in the mean ITL and in TPOT; the ITL percentiles see it only when one gap in
    decode_steps passes 1 - q)."""
    fill = overlap(_fill_s(c, n), n * c.frontend_s_per_request, 4.0)
    base = c.request_overhead_s
    d = est.decode_step_ms / 1e3
    ranks = [(k + 0.5) / 64 for k in range(64)]
    mean_frac = sum(_fill_frac(c, n, f) for f in ranks) / len(ranks)
    ttft = {q: base + fill * _fill_frac(c, n, q) for q in (0.5, 0.95, 0.99)}
    mean = base + fill * mean_frac
    wait = fill * (1.0 - mean_frac)  # the one long gap of a request, on average
    itl = d + wait / c.decode_steps
    itl_q = {q: d if 1.0 / c.decode_steps < 1.0 - q else d + wait for q in (0.5, 0.95, 0.99)}
    # TPOT over requests: the first prompts of the round wait longest for the others' prefill
    tpot_q = {q: d + fill * (1.0 - _fill_frac(c, n, 1.0 - q)) / c.decode_steps for q in (0.5, 0.95, 0.99)}
    e2e = base + fill + c.decode_steps * d
    lam = n / e2e
    return replace(est, ttft_ms=mean * 1e3, ttft_p50_ms=ttft[0.5] * 1e3, ttft_p95_ms=ttft[0.95] * 1e3,
                   ttft_p99_ms=ttft[0.99] * 1e3, itl_ms=itl * 1e3, itl_p50_ms=itl_q[0.5] * 1e3,
                   itl_p95_ms=itl_q[0.95] * 1e3, itl_p99_ms=itl_q[0.99] * 1e3, tpot_ms=itl * 1e3,
                   tpot_p50_ms=tpot_q[0.5] * 1e3, tpot_p95_ms=tpot_q[0.95] * 1e3, tpot_p99_ms=tpot_q[0.99] * 1e3,
                   e2e_latency_ms=e2e * 1e3, requests_per_s=lam, output_tokens_per_s=lam * shape.output_tokens,
                   e2e_p50_ms=e2e * 1e3, e2e_p95_ms=e2e * 1e3, e2e_p99_ms=e2e * 1e3)


def _lockstep_gaps(est: LoadEstimate) -> LoadEstimate:
    """Token gaps of a lockstep round whose prompts are prefilled in one step: the users finish together
    and the next round's prefill runs while nobody decodes, so every gap is a decode step of the whole
    batch (ITL and TPOT, mean and percentiles, ms); the prefill is in TTFT only. dstack's DeepSeek-R1 on
    vLLM 0.7.4 without chunked prefill: ITL p99 within 4 % of p50 at 4-32 users, where the chunked runs'
    staggered rounds show prefill-carrying gaps 4-5x the p50."""
    d = est.decode_step_ms
    return replace(est, itl_ms=d, itl_p50_ms=d, itl_p95_ms=d, itl_p99_ms=d,
                   tpot_ms=d, tpot_p50_ms=d, tpot_p95_ms=d, tpot_p99_ms=d)


def estimate_open_loop(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape,
                       requests_per_s: float, uniform_arrivals: bool = False) -> LoadEstimate:
    """Poisson arrivals at `requests_per_s` (or, with `uniform_arrivals`, one every 1/requests_per_s s:
    a constant-rate client such as guidellm's constant profile, which queues less); the active batch
    solves B = R × (TTFT + decode time)."""
    c = _ctx(catalog, cfg, shape)
    if uniform_arrivals:
        c = replace(c, cv2_arrival=0.0, memo={})
    if c.max_running < 1:
        return _infeasible_estimate(c, 0.0)
    r = max(requests_per_s, 1e-9)

    def excess(b: float) -> float:
        pt = _point(c, b, r)
        return r * (pt.ttft_s + c.decode_steps * pt.itl_s) - b if pt.stable else math.inf

    if excess(float(c.max_running)) > 0:
        pt = _point(c, float(c.max_running), r)
        lam = c.max_running / (pt.ttft_s + c.decode_steps * pt.itl_s) if pt.stable else 0.0
        pt = replace(pt, lam=lam, ttft_s=math.inf, ttft_q_s={q: math.inf for q in pt.ttft_q_s}, stable=False)
        est = _estimate(c, shape, pt, float(c.max_running), capped=True)
        return replace(est, explanation=f"unstable: {r:.2f} req/s exceeds what the replica serves; " + est.explanation)
    lo, hi = 0.0, float(c.max_running)
    while hi - lo > BATCH_TOLERANCE:
        mid = 0.5 * (lo + hi)
        if excess(mid) > 0:
            lo = mid
        else:
            hi = mid
    pt = _point(c, max(hi, 1e-6), r)
    return _estimate(c, shape, pt, hi, capped=False)


def estimate_offline(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape) -> LoadEstimate:
    """Everything queued: the engine runs its largest batch, min(max_num_seqs, KV capacity).
    Throughput = batch / cycle; TTFT is the mean wait to prefill one full batch (half of it)."""
    c = _ctx(catalog, cfg, shape)
    if c.max_running < 1:
        return _infeasible_estimate(c, 0.0)
    b = _saturated_batch(c)
    itl = _cycle_s(c, b)
    lam = b / (c.decode_steps * itl + _prefill_s(c, b, c.prefill_tokens))
    fill = _fill_s(c, b)
    pt = _Point(b, lam, fill / 2 + c.request_overhead_s,
                {q: fill * q + c.request_overhead_s for q in (0.5, 0.95, 0.99)}, itl)
    est = _estimate(c, shape, pt, b, capped=True)
    return replace(est, output_tokens_per_s=b / itl, requests_per_s=b / itl / shape.output_tokens)


def _fill_s(c: _Ctx, b: float) -> float:
    """Time to prefill b prompts back to back in max_num_batched_tokens chunks."""
    return c.sm.step_s(0.0, 0.0, b * c.prefill_tokens, c.cached_tokens + c.prefill_tokens / 2,
                       n_steps=max(1.0, b * c.prefill_tokens / c.budget))


def _burst_fill(c: _Ctx, b: float) -> tuple[float, float]:
    """(seconds, prompt tokens per step) to prefill a burst's first b prompts while the ones already
    prefilled decode beside them. vLLM V1's scheduler (vllm/v1/core/sched/scheduler.py, 0.11.0,
    Scheduler.schedule: "First, schedule the RUNNING requests." ... "Next, schedule the WAITING
    requests." while token_budget > 0) gives every running decode its token first and the waiting
    prompts what is left of max_num_batched_tokens. With K fill steps, step j carries the decodes of
    the j·b/K prompts prefilled before it (those still decoding: at most decode_steps steps' worth), so
    on average b(K-1)/(2K) of them while K ≤ decode_steps; K itself follows from the budget they leave."""
    budget, d = c.budget, c.decode_steps
    steps, running = max(1.0, b * c.prefill_tokens / budget), 0.0
    for _ in range(6):  # K and the decodes beside the prompts depend on each other; a few rounds settle it
        k = max(steps, 1.0)
        running = b * (1.0 - 1.0 / k) / 2.0 if k <= d + 1 else (b / k) * (d - d * (d + 1) / (2.0 * k))
        running = min(running, budget * (1.0 - 1.0 / 16))
        steps = max(1.0, b * c.prefill_tokens / (budget - running))
    per_step = budget - running
    # the decodes beside the fill are early in their outputs: prompt + about half the fill's steps generated
    ctx = c.cached_tokens + c.prefill_tokens + min(steps, d) / 2.0
    t = c.sm.step_s(running * steps, ctx, b * c.prefill_tokens, c.cached_tokens + c.prefill_tokens / 2,
                    n_steps=steps)
    return t, per_step


def estimate_burst(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape, n_prompts: int) -> LoadEstimate:
    """`n_prompts` requests sent at once (vLLM bench serve --request-rate inf --num-prompts N): a
    finite burst, not an endless steady state. The API server hands prompts over one after another
    (frontend time per request, overlapping the engine's work); the first B = min(N, saturated
    batch) are prefilled
    back to back in full token-budget steps (request i's first token after i/B of the fill), the rest
    are admitted as slots free at the steady rate λ = B / E2E(B), and the run ends with the drain of
    the longest outputs (output p95). Throughput = N × output / makespan; TTFT percentiles are over
    the N requests; ITL tails include the fill's full-budget steps."""
    c = _ctx(catalog, cfg, shape)
    if c.max_running < 1:
        return _infeasible_estimate(c, 0.0)
    n = max(float(n_prompts), 1.0)
    b = min(n, _saturated_batch(c))
    itl = _cycle_s(c, b)
    # the API server ingests the prompts one after another while the engine prefills them: the slower
    # of the two paces the fill (a smooth max, exponent 4)
    efill, per_step = _burst_fill(c, b)
    fill = overlap(efill, b * c.frontend_s_per_request, 4.0)
    own = _prefill_s(c, b, c.prefill_tokens)
    e2e_ss = own + c.decode_steps * itl
    lam = b / e2e_ss
    rest = n - b
    ovh = c.request_overhead_s

    # the API server streams no first token before it has ingested the whole burst (its event loop
    # takes the N requests in first): every TTFT is at least the ingestion, N × frontend time
    ingest = n * c.frontend_s_per_request

    def ttft_at(frac: float) -> float:  # TTFT of the request at rank frac·N
        i = frac * n
        t = efill * _fill_frac(c, b, i / b, per_step) if i <= b else efill + (i - b) / lam + own
        return ovh + ingest + t

    mean_ttft = sum(ttft_at((k + 0.5) / BURST_RANKS) for k in range(BURST_RANKS)) / BURST_RANKS
    drain = (c.decode_steps_p95 * c.sm.step_s(max(b * TAIL, 1.0), c.mean_decode_context)
             if c.decode_steps_p95 > c.decode_steps else 0.0)
    # a finite burst has nothing left to prefill once its last prompt is admitted: the replacement
    # phase (rest / λ) runs steps that carry the newcomers' prefill (the steady cycle), the last batch
    # then decodes in decode-only steps. The mean ITL pools all gaps of both phases.
    d0 = c.sm.step_s(b, c.mean_decode_context)
    t_repl = rest / lam
    repl_gaps = t_repl / itl
    itl_mean = (t_repl + c.decode_steps * d0) / (repl_gaps + c.decode_steps)
    repl_frac = repl_gaps / (repl_gaps + c.decode_steps)
    # the fill's full-budget steps: the first B requests decode through half of them on average, and
    # those gaps are in the mean too (a 1,000-prompt burst's first requests wait out ~26 steps that each
    # prefill 8,192 tokens)
    fill_steps = max(1.0, b * c.prefill_tokens / per_step)
    share = (b / n) * min(1.0, fill_steps / 2.0 / c.decode_steps)
    full = c.sm.step_s(b / 2.0, c.mean_decode_context, max(c.budget - b / 2.0, 0.0),
                       c.cached_tokens + c.prefill_tokens / 2)
    base = itl_mean
    itl_mean += share * max(full - base, 0.0)
    # TPOT's mean is over requests: a short request spends a larger part of its few gaps in the fill's
    # steps, so with long-tailed outputs (lognormal, p95 / mean from the shape) the mean over requests of
    # min(1, fill steps / 2 / its output) exceeds the pooled share (Jensen)
    sig = math.log(max(c.decode_steps_p95 / c.decode_steps, 1.0)) / P95_Z
    mu = math.log(c.decode_steps) - sig * sig / 2.0
    half = fill_steps / 2.0
    req_share = (b / n) * sum(min(1.0, half / max(math.exp(mu + sig * _STD_NORMAL.inv_cdf((k + 0.5) / 32)), 1.0))
                              for k in range(32)) / 32
    tpot_mean = base + req_share * max(full - base, 0.0)
    makespan = fill + t_repl + c.decode_steps * d0 + drain + ovh
    pt = _Point(b, n / makespan, mean_ttft, {q: ttft_at(q) for q in (0.5, 0.95, 0.99)}, itl_mean)
    est = _estimate(c, shape, pt, b, capped=b >= c.max_running)
    # the steady state's share of chunk-carrying gaps holds only in the replacement phase
    decode, chunked, ss_share = _itl_steps(c, b)
    for q, name in ((0.5, "itl_p50_ms"), (0.95, "itl_p95_ms"), (0.99, "itl_p99_ms")):
        v = decode + (chunked - decode) * min(1.0, ss_share * repl_frac / (1.0 - q)) ** P95_RAMP_EXPONENT
        est = replace(est, **{name: (v if q <= 0.5 else max(v, itl_mean)) * 1e3})
    tails = {}
    for q, name in ((0.5, "itl_p50_ms"), (0.95, "itl_p95_ms"), (0.99, "itl_p99_ms")):
        ramp = min(1.0, share / (1.0 - q)) ** P95_RAMP_EXPONENT
        tails[name] = max(getattr(est, name), (est.decode_step_ms + (full * 1e3 - est.decode_step_ms) * ramp))
    m = share * c.decode_steps
    dz = (full - c.sm.step_s(b, c.mean_decode_context)) * math.sqrt(m) / c.decode_steps * 1e3
    tp = {name: max(getattr(est, name), est.itl_ms + Z[q] * dz)
          for q, name in ((0.95, "tpot_p95_ms"), (0.99, "tpot_p99_ms"))}
    return replace(est, output_tokens_per_s=n * shape.output_tokens / makespan, tpot_ms=tpot_mean * 1e3, **tails, **tp)


__all__ = ["Goodput", "LoadEstimate", "ReplicaConfig", "WorkloadShape", "estimate_burst", "estimate_closed_loop",
           "estimate_offline", "estimate_open_loop"]
