"""A finite burst that the client holds to a cap in flight: N requests sent at once, at most C of
them outstanding (guidellm's throughput profile and its constant profile at a rate far above
capacity, both under `max_concurrency`; vllm bench serve --max-concurrency C --num-prompts N at an
infinite rate). The first C go out together (a burst of C, sizing.perf.load.estimate_burst); each of
the other N - C is sent when one finishes, so it meets a server running about C sequences (a closed
loop of C, estimate_closed_loop). A request's latencies count from when the client sends it (its
wait in the client's own queue is not in TTFT), so TTFT, ITL, TPOT and E2E are the mixture of the
two phases' distributions, weighted C / N and (N - C) / N.

Units as in LoadEstimate: latencies in ms, throughputs whole replica per second.
"""

from __future__ import annotations

from dataclasses import replace

from sizing.catalog.lookup import Catalog
from sizing.perf.load import LoadEstimate, WorkloadShape, estimate_burst, estimate_closed_loop
from sizing.perf.replica import ReplicaConfig

_QS = (0.5, 0.95, 0.99)


def _quantile_fn(mean: float, p50: float, p95: float, p99: float) -> list[tuple[float, float]]:
    """(probability, value) knots of one phase's distribution, piecewise linear: linear extrapolation
    of the p50-p95 slope down to probability 0 (at least 0) and of the p95-p99 slope up to 1."""
    lo = max(0.0, p50 - (p95 - p50) * 0.5 / 0.45)
    hi = p99 + (p99 - p95) * 0.01 / 0.04
    return [(0.0, min(lo, p50)), (0.5, p50), (0.95, max(p95, p50)), (0.99, max(p99, p95, p50)),
            (1.0, max(hi, p99, p95, p50))]


def _cdf(knots: list[tuple[float, float]], x: float) -> float:
    if x <= knots[0][1]:
        return 0.0
    for (p0, v0), (p1, v1) in zip(knots, knots[1:], strict=False):
        if x <= v1:
            return p0 + (p1 - p0) * ((x - v0) / (v1 - v0) if v1 > v0 else 1.0)
    return 1.0


def mixture_quantile(parts: list[tuple[float, list[tuple[float, float]]]], q: float) -> float:
    """Quantile q of a mixture: parts are (weight, knots of _quantile_fn); bisection on the value."""
    lo = min(k[0][1] for _, k in parts)
    hi = max(k[-1][1] for _, k in parts)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if sum(w * _cdf(k, mid) for w, k in parts) < q:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def estimate_capped_burst(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape, n_requests: int,
                          max_in_flight: int, synchronized: bool = False) -> LoadEstimate:
    """N = `n_requests` sent at once with at most C = `max_in_flight` outstanding (module docstring).
    With N <= C it is the plain burst of N. `synchronized`: fixed lengths, so the closed phase runs in
    lockstep rounds (estimate_closed_loop's `synchronized`)."""
    n, cap = max(int(n_requests), 1), max(int(max_in_flight), 1)
    burst = estimate_burst(catalog, cfg, shape, min(n, cap))
    if n <= cap:
        return burst
    closed = estimate_closed_loop(catalog, cfg, shape, cap, synchronized=synchronized)
    if not closed.stable or closed.output_tokens_per_s <= 0 or burst.output_tokens_per_s <= 0:
        return burst
    w = cap / n
    fields: dict[str, float] = {}
    for metric in ("ttft", "itl", "tpot", "e2e"):
        mean_b, mean_c = burst.percentile(metric, "mean"), closed.percentile(metric, "mean")
        parts = [(w, _quantile_fn(mean_b, *(burst.percentile(metric, f"p{int(q * 100)}") for q in _QS))),
                 (1.0 - w, _quantile_fn(mean_c, *(closed.percentile(metric, f"p{int(q * 100)}") for q in _QS)))]
        for q in _QS:
            fields[f"{metric}_p{int(q * 100)}_ms"] = mixture_quantile(parts, q)
        fields[{"ttft": "ttft_ms", "itl": "itl_ms", "tpot": "tpot_ms", "e2e": "e2e_latency_ms"}[metric]] = \
            w * mean_b + (1.0 - w) * mean_c
    # output tokens: the first wave's C at the burst's pace, the other N - C at the closed loop's
    osl = shape.output_tokens
    seconds = cap * osl / burst.output_tokens_per_s + (n - cap) * osl / closed.output_tokens_per_s
    tput = n * osl / seconds
    f = fields
    return replace(burst, requests_per_s=tput / osl, output_tokens_per_s=tput,
                   explanation=f"{n} requests at most {cap} in flight: " + burst.explanation,
                   ttft_ms=f["ttft_ms"], ttft_p50_ms=f["ttft_p50_ms"], ttft_p95_ms=f["ttft_p95_ms"],
                   ttft_p99_ms=f["ttft_p99_ms"], itl_ms=f["itl_ms"], itl_p50_ms=f["itl_p50_ms"],
                   itl_p95_ms=f["itl_p95_ms"], itl_p99_ms=f["itl_p99_ms"], tpot_ms=f["tpot_ms"],
                   tpot_p50_ms=f["tpot_p50_ms"], tpot_p95_ms=f["tpot_p95_ms"], tpot_p99_ms=f["tpot_p99_ms"],
                   e2e_latency_ms=f["e2e_latency_ms"], e2e_p50_ms=f["e2e_p50_ms"], e2e_p95_ms=f["e2e_p95_ms"],
                   e2e_p99_ms=f["e2e_p99_ms"])


__all__ = ["estimate_capped_burst", "mixture_quantile"]
