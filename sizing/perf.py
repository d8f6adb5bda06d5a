"""Serving performance of one model replica under continuous batching: closed loop, open loop,
offline, and goodput at a p95 SLO.

Owns the public performance API (ReplicaConfig, WorkloadShape, LoadEstimate, Goodput and the
estimate_* / goodput functions). Step physics lives in sizing.perf_step, fitted constants in
sizing.perf_calibration. Must not import pulumi, boto3, numpy, or the planner/CLI.

Method (analytic, no simulation; one estimate takes tens of microseconds):
- A *cycle* advances every active sequence by one token. In steady state each decoding sequence
  brings prompt/output prompt tokens of new prefill work per cycle, scheduled by chunked prefill
  inside the engine's token budget (max_num_batched_tokens); mean ITL = cycle time.
- ITL p95: a share f of a request's steps carries another request's prefill chunk; when f ≥ 5 %
  the p95 step is a chunked step, below that it ramps (f/5 %)² towards the decode-only step.
- TTFT = prefill service time S (own prompt, in chunks beside the running decodes) + M/G/1 queueing
  for the prefill server (Pollaczek–Khinchine mean; p95 from the exponential tail
  P(W > t) ≈ ρ·exp(-ρt/E[W])) + half a step of residual; closed loops beyond the batch limit add
  the admission-queue wait from Little's law.
- Closed loop: λ solves λ = N / E2E(λ). Open loop: the active batch B solves B = R·T(B).
Units: ms for latencies, tokens/s and requests/s for throughput, whole replica unless named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sizing.catalog import Catalog, ModelArch
from sizing.errors import CatalogLookupError
from sizing.memory import GIB, MemoryFit, memory_fit
from sizing.perf_calibration import load_calibration
from sizing.perf_step import StepModel, build_step_model
from sizing.spec import WorkloadSpec

P95_Z = 1.645  # standard-normal 95th percentile, for a prompt-length cv from (mean, p95)
TAIL = 0.05  # the percentile's tail mass
# How sharply ITL p95 switches to the prefill-carrying step as their share of steps nears TAIL.
# A pooled p95 over all gaps is a step function of that share (below 5 % the long gaps sit above
# the percentile); the ramp keeps it continuous and monotone for the goodput bisection while
# staying within a few percent of the step function until the share is ~70 % of TAIL.
P95_RAMP_EXPONENT = 6


@dataclass(frozen=True)
class ReplicaConfig:
    """One model replica: tp × pp GPUs of one type. `interconnect` None derives it from the GPU:
    NVLink when gpus.csv lists an NVLink bandwidth (A100, H100, H200, B200: p-family), else PCIe
    (A10G, L4, L40S: g-family). Engine limits None use engines.csv defaults."""

    model: ModelArch
    gpu: str
    precision: str
    tp: int = 1
    pp: int = 1
    kv_cache_dtype: str = "auto"
    engine: str = "vllm"
    interconnect: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None


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
    `ttft_ms` is inf when an open-loop rate exceeds capacity (stable False)."""

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


@dataclass(frozen=True)
class Goodput:
    """The largest load per replica that meets both p95 targets and the memory limit."""

    feasible: bool
    output_tokens_per_s: float
    requests_per_s: float
    concurrency: float
    at: LoadEstimate | None
    reason: str
    reason_code: str = ""


@dataclass(frozen=True)
class _Ctx:
    """Everything about one (config, shape) that does not depend on the load."""

    sm: StepModel
    fit: MemoryFit
    cap: int  # largest batch: min(max_num_seqs, KV capacity)
    cap_reason: str  # "kv-capacity" | "engine-limit"
    budget: float  # max_num_batched_tokens
    isl_eff: float  # prompt tokens that need compute (prefix-cache misses)
    isl_eff_p95: float
    cached_tokens: float
    osl_decode: float  # decode steps per request (output - 1, at least 1)
    ctx_decode: float  # mean context a decoding sequence attends over
    cv2_service: float
    bw_eff: float


def _engine_limits(catalog: Catalog, cfg: ReplicaConfig) -> tuple[int, int, str]:
    try:
        eng = catalog.engine(cfg.engine)
        mem_engine = cfg.engine
    except CatalogLookupError:  # a calibration-only engine (e.g. tgi) sizes memory like vLLM
        load_calibration().engine_eff(cfg.engine)
        eng, mem_engine = catalog.engine("vllm"), "vllm"
    return (cfg.max_num_seqs or eng.default_max_num_seqs,
            cfg.max_num_batched_tokens or eng.default_max_num_batched_tokens, mem_engine)


_CTX_CACHE: dict[tuple[int, ReplicaConfig, WorkloadShape], tuple[Catalog, _Ctx]] = {}


def clear_caches() -> None:
    """Forget cached per-config constants (after the calibration changes)."""
    _CTX_CACHE.clear()


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


def _build_ctx(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape) -> _Ctx:
    cal = load_calibration()
    gpu = catalog.gpu(cfg.gpu)
    link = cfg.interconnect or ("nvlink" if gpu.nvlink_bandwidth_gbs else "pcie")
    sm = build_step_model(catalog, cal, cfg.model, cfg.gpu, cfg.precision, cfg.tp, cfg.pp,
                          cfg.kv_cache_dtype, cfg.engine, link)
    max_seqs, budget, mem_engine = _engine_limits(catalog, cfg)
    full_tokens = int(math.ceil((shape.prompt_tokens_p95 or shape.prompt_tokens)
                                + (shape.output_tokens_p95 or shape.output_tokens)))
    fit = memory_fit(catalog, cfg.model, cfg.gpu, cfg.precision, cfg.tp, cfg.pp, full_tokens,
                     cfg.kv_cache_dtype, mem_engine, cfg.gpu_memory_utilization,
                     max_num_batched_tokens=cfg.max_num_batched_tokens)
    # steady state: running sequences are spread evenly over their decode, so one holds on average
    # prompt + output/2 tokens of paged KV cache (a full-length one must still fit: `fit.fits`)
    avg_tokens = shape.prompt_tokens + shape.output_tokens / 2
    kv_cap = int(fit.kv_cache_gib_available * GIB / (fit.kv_cache_bytes_per_token * avg_tokens)) if fit.fits else 0
    cap, why = (kv_cap, "kv-capacity") if kv_cap < max_seqs else (max_seqs, "engine-limit")
    hit = min(max(shape.prefix_cache_hit_rate, 0.0), 0.999)
    isl_p95 = shape.prompt_tokens_p95 or shape.prompt_tokens
    cv = max(isl_p95 / shape.prompt_tokens - 1.0, 0.0) / P95_Z if shape.prompt_tokens > 0 else 0.0
    return _Ctx(sm=sm, fit=fit, cap=cap, cap_reason=why, budget=float(budget),
                isl_eff=shape.prompt_tokens * (1 - hit), isl_eff_p95=isl_p95 * (1 - hit),
                cached_tokens=shape.prompt_tokens * hit, osl_decode=max(shape.output_tokens - 1.0, 1.0),
                ctx_decode=shape.prompt_tokens + shape.output_tokens / 2.0, cv2_service=cv * cv,
                bw_eff=sm.bw_bytes_per_s / (sm.peak_bandwidth_gbs * 1e9))


# --- step-level quantities (seconds) ---------------------------------------------------------
def _cycle_s(c: _Ctx, batch: float) -> float:
    """Mean ITL: time to advance `batch` decoding sequences one token, with their share of prefill."""
    p = batch * c.isl_eff / c.osl_decode
    n = max(1.0, (batch + p) / c.budget)
    return c.sm.step_s(batch, c.ctx_decode, p, c.cached_tokens + c.isl_eff / 2, n_steps=n)


def _chunk(c: _Ctx, batch: float, prompt: float) -> float:
    return max(min(prompt, c.budget - batch), min(prompt, c.budget / 16))


def _itl_p95_s(c: _Ctx, batch: float, mean_s: float) -> float:
    decode = c.sm.step_s(batch, c.ctx_decode)
    ch = _chunk(c, batch, c.isl_eff_p95)
    chunked = c.sm.step_s(batch, c.ctx_decode, ch, c.cached_tokens + ch / 2)
    # share of a request's steps that carry another request's prefill chunk (its own is in TTFT)
    share = max(batch - 1.0, 0.0) * c.isl_eff / c.osl_decode / ch if ch > 0 else 0.0
    # a mixture's p95 jumps to the chunked step once that share passes 5 %; smoothed below it
    # (P95_RAMP_EXPONENT) so that ITL p95 stays continuous and monotone in the batch
    p95 = decode + (chunked - decode) * min(1.0, share / TAIL) ** P95_RAMP_EXPONENT
    return max(p95, mean_s)


def _prefill_s(c: _Ctx, batch: float, prompt: float) -> float:
    """Service time of one prompt's prefill, in chunks beside `batch` running decodes."""
    if prompt <= 0:
        return c.sm.step_s(max(batch, 1.0), c.ctx_decode)
    ch = _chunk(c, batch, prompt)
    return (prompt / ch) * c.sm.step_s(batch, c.ctx_decode, ch, c.cached_tokens + ch / 2)


def _prefill_busy_s(c: _Ctx, batch: float) -> float:
    """GPU time one prompt's prefill adds beyond the running decodes (its marginal cost): the
    prefill server's service time. The wall-clock prefill (_prefill_s) also contains decode work,
    which the decode cycle already accounts for."""
    ch = _chunk(c, batch, c.isl_eff)
    if ch <= 0:
        return 0.0
    with_chunk = c.sm.step_s(batch, c.ctx_decode, ch, c.cached_tokens + ch / 2)
    return (c.isl_eff / ch) * max(with_chunk - c.sm.step_s(batch, c.ctx_decode), 0.0)


def _wait_s(c: _Ctx, lam: float, service: float, busy: float) -> tuple[float, float]:
    """(mean, p95) M/G/1 wait for the prefill server at arrival rate `lam` (1/s): utilization from
    the marginal prefill time `busy`, each waiting request ahead costing its wall-clock `service`."""
    rho = lam * busy
    if rho >= 1.0:
        return math.inf, math.inf
    mean = rho * service * (1.0 + c.cv2_service) / (2.0 * (1.0 - rho))
    p95 = (mean / rho) * math.log(rho / TAIL) if rho > TAIL and mean > 0 else 0.0
    return mean, max(p95, mean)


@dataclass(frozen=True)
class _Point:
    batch: float
    lam: float
    ttft_s: float
    ttft_p95_s: float
    itl_s: float
    itl_p95_s: float
    stable: bool = True


def _point(c: _Ctx, batch: float, lam: float, queue_s: float = 0.0) -> _Point:
    itl = _cycle_s(c, batch)
    s, s95 = _prefill_s(c, batch, c.isl_eff), _prefill_s(c, batch, c.isl_eff_p95)
    w, w95 = _wait_s(c, lam, s, _prefill_busy_s(c, batch))
    residual = 0.5 * c.sm.step_s(batch, c.ctx_decode) if batch > 1 else 0.0
    return _Point(batch, lam, queue_s + s + w + residual, queue_s + s95 + w95 + residual, itl,
                  _itl_p95_s(c, batch, itl), stable=math.isfinite(w))


def _closed(c: _Ctx, n: float) -> _Point:
    """Closed loop with n ≤ cap in flight: bisection on λ = n / E2E(λ)."""
    itl = _cycle_s(c, n)
    d = c.osl_decode * itl
    s = _prefill_s(c, n, c.isl_eff)
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
    mem, comp, comm = c.sm.parts(batch, c.ctx_decode, batch * c.isl_eff / c.osl_decode)
    w_gib = c.sm.weight_gib_per_gpu
    if capped and mem >= comp:
        if c.cap_reason == "kv-capacity":
            return "kv-capacity", (f"the KV cache holds only {c.cap} sequences of this length, so the batch "
                                   "stays small and each step is dominated by reading weights")
        return "engine-limit", (f"the engine's max_num_seqs ({c.cap}) caps the batch while steps are still "
                                "memory-bound")
    if comm > max(mem, comp):
        return "communication", (f"tensor-parallel all-reduces ({c.sm.allreduces_per_stage} per step over tp="
                                 f"{c.sm.tp}) take longer than the memory and compute work of a step")
    if comp > mem:
        return "compute", (f"at batch {batch:.0f} the matrix math ({comp * 1e3:.1f} ms per step) outweighs "
                           f"reading memory ({mem * 1e3:.1f} ms)")
    return "memory-bandwidth", (f"each step reads {w_gib:.1f} GiB of weights per GPU plus the KV cache at "
                                f"{c.sm.peak_bandwidth_gbs:.0f} GB/s × {c.bw_eff:.2f} efficiency "
                                f"({mem * 1e3:.1f} ms) which outweighs the math ({comp * 1e3:.1f} ms)")


def _estimate(c: _Ctx, shape: WorkloadShape, pt: _Point, concurrency: float, capped: bool) -> LoadEstimate:
    e2e = pt.ttft_s + c.osl_decode * pt.itl_s
    bound, why = _bound(c, pt.batch, capped)
    return LoadEstimate(
        concurrency=concurrency, requests_per_s=pt.lam, output_tokens_per_s=pt.lam * shape.output_tokens,
        ttft_ms=pt.ttft_s * 1e3, ttft_p95_ms=pt.ttft_p95_s * 1e3, itl_ms=pt.itl_s * 1e3,
        itl_p95_ms=pt.itl_p95_s * 1e3, e2e_latency_ms=e2e * 1e3,
        decode_step_ms=c.sm.step_s(pt.batch, c.ctx_decode) * 1e3, bound=bound,
        max_concurrent_sequences=c.cap, stable=pt.stable, explanation=why)


def _infeasible_estimate(c: _Ctx, concurrency: float) -> LoadEstimate:
    return LoadEstimate(concurrency, 0.0, 0.0, math.inf, math.inf, math.inf, math.inf, math.inf, math.inf,
                        "weights-do-not-fit", 0, False, f"the model does not fit: {c.fit.reason}")


def estimate_closed_loop(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape,
                         concurrency: int) -> LoadEstimate:
    """`concurrency` requests always in flight (vLLM bench --max-concurrency). Beyond the batch
    limit the rest wait for admission, which adds to TTFT (Little's law)."""
    c = _ctx(catalog, cfg, shape)
    if c.cap < 1:
        return _infeasible_estimate(c, concurrency)
    n = max(float(concurrency), 1.0)
    if n <= c.cap:
        return _estimate(c, shape, _closed(c, n), n, capped=False)
    full = _closed(c, float(c.cap))
    e2e_active = full.ttft_s + c.osl_decode * full.itl_s
    queue = n / full.lam - e2e_active
    pt = replace(full, ttft_s=full.ttft_s + queue, ttft_p95_s=full.ttft_p95_s + queue)
    return _estimate(c, shape, pt, n, capped=True)


def estimate_open_loop(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape,
                       requests_per_s: float) -> LoadEstimate:
    """Poisson arrivals at `requests_per_s`; the active batch solves B = R × (TTFT + decode time)."""
    c = _ctx(catalog, cfg, shape)
    if c.cap < 1:
        return _infeasible_estimate(c, 0.0)
    r = max(requests_per_s, 1e-9)

    def excess(b: float) -> float:
        pt = _point(c, b, r)
        return r * (pt.ttft_s + c.osl_decode * pt.itl_s) - b if pt.stable else math.inf

    if excess(float(c.cap)) > 0:
        pt = _point(c, float(c.cap), r)
        pt = replace(pt, lam=c.cap / (pt.ttft_s + c.osl_decode * pt.itl_s) if pt.stable else 0.0,
                     ttft_s=math.inf, ttft_p95_s=math.inf, stable=False)
        est = _estimate(c, shape, pt, float(c.cap), capped=True)
        return replace(est, explanation=f"unstable: {r:.2f} req/s exceeds what the replica serves; " + est.explanation)
    lo, hi = 0.0, float(c.cap)
    for _ in range(40):
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
    if c.cap < 1:
        return _infeasible_estimate(c, 0.0)
    b = float(c.cap)
    itl = _cycle_s(c, b)
    lam = b / (c.osl_decode * itl + _prefill_s(c, b, c.isl_eff))
    prefill_batch = c.sm.step_s(0.0, 0.0, b * c.isl_eff, c.cached_tokens + c.isl_eff / 2,
                                n_steps=max(1.0, b * c.isl_eff / c.budget))
    pt = _Point(b, lam, prefill_batch / 2, prefill_batch, itl, _itl_p95_s(c, b, itl))
    est = _estimate(c, shape, pt, b, capped=True)
    return replace(est, output_tokens_per_s=b / itl, requests_per_s=b / itl / shape.output_tokens)


from sizing.perf_goodput import goodput  # noqa: E402  (re-exported: the public API lives in sizing.perf)

__all__ = ["Goodput", "LoadEstimate", "ReplicaConfig", "WorkloadShape", "estimate_closed_loop",
           "estimate_offline", "estimate_open_loop", "goodput"]
