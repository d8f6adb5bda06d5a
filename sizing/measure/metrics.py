"""Per-request records and their aggregation, with the definitions of vLLM's serving benchmark
(`vllm/benchmarks/serve.py::calculate_metrics`):

- TTFT: request sent -> first streamed chunk with a `choices` entry.
- ITL: the gap between consecutive such chunks (one sample per gap, pooled over all requests).
- TPOT: (e2e - TTFT) / (output tokens - 1), per request; 0 for a request with one output token.
- E2E: request sent -> last chunk with a `choices` entry.
- Output tokens: the server's `usage.completion_tokens` when it sends one, else the chunk count.
- Throughputs: totals over the run's wall time (first request sent -> last request finished).
- Goodput (requests/s): requests whose TTFT <= the TTFT SLO *and* TPOT <= the ITL SLO (*and* E2E <= the
  E2E SLO), over the wall time; vLLM's `--goodput ttft:<ms> tpot:<ms> e2el:<ms>`. The stack's ITL target maps
  to vLLM's tpot key; a metric with several percentile targets uses its tightest.
- Percentiles: linear interpolation between closest ranks (numpy's default).
- Meeting the SLO: every target the stack sets (sizing.spec.Slo.targets(): TTFT, ITL, TPOT, E2E at p50, p90,
  p95, p99) holds on the run's distribution, and errors are at most 1%; `missed` names each target that
  does not hold.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

PERCENTILES = (50, 90, 95, 99)
Target = tuple[str, str, float]  # (metric, percentile, ms), as sizing.spec.Slo.targets() gives them


@dataclass
class RequestRecord:
    """One request as the client saw it. Times in seconds from the run's start."""

    start_s: float
    prompt_tokens_target: int
    output_tokens_target: int
    success: bool = False
    error: str = ""
    ttft_s: float = 0.0
    e2e_s: float = 0.0
    itls_s: list[float] = field(default_factory=list)
    chunks: int = 0
    output_tokens_server: int | None = None
    prompt_tokens_server: int | None = None

    @property
    def output_tokens(self) -> int:
        return self.output_tokens_server if self.output_tokens_server is not None else self.chunks

    @property
    def tpot_s(self) -> float:
        n = self.output_tokens
        return (self.e2e_s - self.ttft_s) / (n - 1) if n > 1 else 0.0

    @property
    def end_s(self) -> float:
        return self.start_s + self.e2e_s


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile with linear interpolation (numpy's default); NaN for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    k = (len(xs) - 1) * p / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Distribution(_M):
    """A latency distribution in ms; NaN-free: figures are None when there were no samples."""

    samples: int
    mean: float | None
    p50: float | None
    p90: float | None = None  # absent in results written before p90 was measured
    p95: float | None
    p99: float | None

    @classmethod
    def of_seconds(cls, values_s: list[float]) -> Distribution:
        if not values_s:
            return cls(samples=0, mean=None, p50=None, p90=None, p95=None, p99=None)
        ms = [v * 1000.0 for v in values_s]
        return cls(samples=len(ms), mean=sum(ms) / len(ms), p50=percentile(ms, 50), p90=percentile(ms, 90),
                   p95=percentile(ms, 95), p99=percentile(ms, 99))

    def at(self, q: str) -> float | None:
        """The figure at a percentile name (p50, p90, p95, p99), ms; None without samples."""
        return getattr(self, q) if q in ("p50", "p90", "p95", "p99") else None


class SloTarget(_M):
    """One target a run is judged against: metric (ttft, itl, tpot, e2e), percentile (p50..p99), ms."""

    metric: str
    percentile: str
    ms: float


class RunMetrics(_M):
    """One load point of a bench run."""

    mode: str  # concurrency (closed loop) | rate (open loop, Poisson arrivals)
    load: float  # concurrent requests, or requests/s
    planned: bool = False  # the plan's planned load (verify judges this run)
    duration_s: float  # how long new requests were issued
    wall_s: float  # first request sent -> last request finished
    requests_sent: int
    completed: int
    errors: int
    error_rate: float
    error_kinds: dict[str, int]
    ttft_ms: Distribution
    itl_ms: Distribution
    tpot_ms: Distribution
    e2e_ms: Distribution
    prompt_tokens_mean: float | None  # the server's count when it reports usage, else the target
    prompt_tokens_counted_by: str  # server | target
    output_tokens_mean: float | None
    output_tokens_counted_by: str  # server | chunks
    output_tokens_total: int
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    achieved_concurrency: float  # mean requests in flight: sum of e2e / wall time
    slo_ttft_p95_ms: float | None  # None: the stack sets no such target (sizing.spec.Slo.target_ms)
    slo_itl_p95_ms: float | None
    # every target the run is judged against (sizing.spec.Slo.targets()); empty in results written before
    # bench judged them all (then the two p95 fields above are the targets)
    slo_targets: list[SloTarget] = []
    good_requests: int
    goodput_requests_per_s: float  # vLLM's request goodput
    goodput_output_tokens_per_s: float  # output tokens of good requests / wall time
    meets_slo: bool  # every target in slo_targets within the SLO, and no errors above 1%
    missed: list[str] = []  # one line per target (or the error rate) that does not hold

    def targets(self) -> tuple[Target, ...]:
        """The (metric, percentile, ms) targets this run was judged against."""
        if self.slo_targets:
            return tuple((t.metric, t.percentile, t.ms) for t in self.slo_targets)
        return tuple((m, "p95", v) for m, v in (("ttft", self.slo_ttft_p95_ms), ("itl", self.slo_itl_p95_ms))
                     if v is not None)

    def distribution(self, metric: str) -> Distribution:
        return {"ttft": self.ttft_ms, "itl": self.itl_ms, "tpot": self.tpot_ms, "e2e": self.e2e_ms}[metric]


def _error_kind(err: str) -> str:
    return err.split(":", 1)[0] if err else "unknown"


MAX_ERROR_RATE = 0.01  # a run with more failed requests than this misses its SLO


def judge(dists: dict[str, Distribution], targets: tuple[Target, ...], error_rate: float) -> list[str]:
    """One line per target that does not hold (and for an error rate above MAX_ERROR_RATE); [] when the run
    meets every target. A TTFT or E2E target with no sample misses (nothing completed); ITL and TPOT have no
    sample when every output was one token, which no per-token target can miss."""
    from sizing.spec import SLO_LABELS

    out: list[str] = []
    for m, q, v in targets:
        got = dists[m].at(q)
        label = f"{SLO_LABELS.get(m, m)} {q}"
        if got is None:
            if m in ("ttft", "e2e"):
                out.append(f"{label} ≤ {v:g} ms: no request completed")
        elif got > v:
            out.append(f"{label} ≤ {v:g} ms: measured {got:,.1f} ms")
    if error_rate > MAX_ERROR_RATE:
        out.append(f"errors ≤ {MAX_ERROR_RATE:.0%}: measured {error_rate:.1%}")
    return out


def aggregate(records: list[RequestRecord], *, mode: str, load: float, duration_s: float,
              slo_ttft_ms: float | None = None, slo_itl_ms: float | None = None, planned: bool = False,
              targets: tuple[Target, ...] | None = None) -> RunMetrics:
    """One load point's figures, judged against `targets` (metric, percentile, ms; sizing.spec.Slo.targets());
    without them, against `slo_ttft_ms` / `slo_itl_ms` as p95 targets, None where the SLO sets none."""
    if targets is None:
        targets = tuple((m, "p95", v) for m, v in (("ttft", slo_ttft_ms), ("itl", slo_itl_ms)) if v is not None)
    tightest = {m: min((v for mm, _, v in targets if mm == m), default=math.inf) for m in ("ttft", "itl", "tpot",
                                                                                           "e2e")}
    ttft_bound = tightest["ttft"]
    itl_bound = min(tightest["itl"], tightest["tpot"])
    e2e_bound = tightest["e2e"]
    ok = [r for r in records if r.success]
    errors = len(records) - len(ok)
    wall = (max(r.end_s for r in records) - min(r.start_s for r in records)) if records else 0.0
    wall = max(wall, 1e-9)
    out_total = sum(r.output_tokens for r in ok)
    in_counts = [r.prompt_tokens_server if r.prompt_tokens_server is not None else r.prompt_tokens_target
                 for r in ok]
    by_server_in = bool(ok) and all(r.prompt_tokens_server is not None for r in ok)
    by_server_out = bool(ok) and all(r.output_tokens_server is not None for r in ok)
    good = [r for r in ok if r.ttft_s * 1000.0 <= ttft_bound and r.tpot_s * 1000.0 <= itl_bound
            and r.e2e_s * 1000.0 <= e2e_bound]
    ttft = Distribution.of_seconds([r.ttft_s for r in ok])
    itl = Distribution.of_seconds([x for r in ok for x in r.itls_s])
    tpot = Distribution.of_seconds([r.tpot_s for r in ok if r.output_tokens > 1])
    e2e = Distribution.of_seconds([r.e2e_s for r in ok])
    error_rate = errors / len(records) if records else 0.0
    missed = judge({"ttft": ttft, "itl": itl, "tpot": tpot, "e2e": e2e}, targets, error_rate)
    if ttft.p95 is None and not any(m in ("ttft", "e2e") for m, _, _ in targets):
        missed.append("no request completed")
    return RunMetrics(
        mode=mode, load=load, planned=planned, duration_s=duration_s, wall_s=wall,
        requests_sent=len(records), completed=len(ok), errors=errors, error_rate=error_rate,
        error_kinds=dict(Counter(_error_kind(r.error) for r in records if not r.success)),
        ttft_ms=ttft, itl_ms=itl, tpot_ms=tpot, e2e_ms=e2e,
        prompt_tokens_mean=sum(in_counts) / len(in_counts) if in_counts else None,
        prompt_tokens_counted_by="server" if by_server_in else "target",
        output_tokens_mean=out_total / len(ok) if ok else None,
        output_tokens_counted_by="server" if by_server_out else "chunks",
        output_tokens_total=out_total,
        output_tokens_per_s=out_total / wall,
        total_tokens_per_s=(out_total + sum(in_counts)) / wall,
        requests_per_s=len(ok) / wall,
        achieved_concurrency=sum(r.e2e_s for r in records) / wall,
        slo_ttft_p95_ms=next((v for m, q, v in targets if (m, q) == ("ttft", "p95")), None),
        slo_itl_p95_ms=next((v for m, q, v in targets if (m, q) == ("itl", "p95")), None),
        slo_targets=[SloTarget(metric=m, percentile=q, ms=v) for m, q, v in targets],
        good_requests=len(good),
        goodput_requests_per_s=len(good) / wall,
        goodput_output_tokens_per_s=sum(r.output_tokens for r in good) / wall,
        meets_slo=not missed, missed=missed,
    )
