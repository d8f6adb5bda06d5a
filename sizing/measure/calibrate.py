"""`llmcap calibrate`: a bench results file -> one calibration overlay entry (per GPU, engine, model).

goodput_scale = measured goodput per replica / predicted goodput per replica, where measured goodput is
the output tokens/s of the heaviest run that still met both SLO p95s (the plan's own definition of
goodput), divided by the replicas behind the endpoint. The prediction is the bundled model's: a scale
the plan already took from an earlier overlay is divided out, so calibrations do not compound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sizing.errors import CheckFailedError, SpecError
from sizing.measure.verify import predicted_means
from sizing.perf.overlay import OverlayEntry

if TYPE_CHECKING:
    from sizing.measure.results import BenchResults
    from sizing.plan import Plan, Pool


def pick_pool(plan: Plan, name: str | None) -> Pool:
    if name is not None:
        for p in plan.pools:
            if p.name == name:
                return p
        raise SpecError(f"--pool: no pool {name!r} in the plan; pools: {', '.join(p.name for p in plan.pools)}")
    if len(plan.pools) != 1:
        raise SpecError(f"the plan has {len(plan.pools)} pools; name the one benched with --pool "
                        f"({', '.join(p.name for p in plan.pools)})")
    return plan.pools[0]


def entry_from_results(res: BenchResults, plan: Plan, replicas: float, pool_name: str | None = None,
                       source: str = "") -> OverlayEntry:
    pool = pick_pool(plan, pool_name)
    if replicas <= 0:
        raise SpecError(f"replicas behind the endpoint must be positive (got {replicas})")
    engine = pool.engine
    model = pool.vllm.model
    meeting = [r for r in res.runs if r.meets_slo]
    if not meeting:
        lightest = min(res.runs, key=lambda r: r.load)
        raise CheckFailedError(f"no run met the SLO (lightest: {lightest.mode} {lightest.load:g}); "
                               "bench at lower loads (--concurrency or --rate) to find the goodput")
    best = max(meeting, key=lambda r: r.output_tokens_per_s)
    saturated = any(not r.meets_slo and r.load > best.load for r in res.runs)
    measured = best.output_tokens_per_s / replicas
    already = pool.goodput_scale  # the overlay scale this plan already applied (divided out: no compounding)
    predicted = pool.per_replica.goodput_output_tokens_per_s / already
    if predicted <= 0:
        raise SpecError(f"the plan predicts no goodput for pool {pool.name}; nothing to calibrate against")
    if not saturated and measured < predicted:
        raise CheckFailedError(
            f"every run met the SLO, the heaviest at {best.mode} {best.load:g} giving {measured:,.0f} output "
            f"tokens/s per replica, below the predicted {predicted:,.0f}: that is not the goodput limit; "
            "bench heavier loads until a run misses the SLO, then calibrate")
    planned = res.planned_run()
    ttft_p95_pred, itl_p95_pred, _, _ = predicted_means(plan)
    return OverlayEntry(
        gpu=pool.gpu, engine=engine, model=model, goodput_scale=measured / predicted,
        itl_p95_scale=planned.itl_ms.p95 / itl_p95_pred if planned.itl_ms.p95 and itl_p95_pred else None,
        ttft_p95_scale=planned.ttft_ms.p95 / ttft_p95_pred if planned.ttft_ms.p95 and ttft_p95_pred else None,
        lower_bound=not saturated,
        measured_goodput_output_tokens_per_s_per_replica=measured,
        predicted_goodput_output_tokens_per_s_per_replica=predicted,
        precision=pool.precision, tensor_parallel=pool.tensor_parallel,
        endpoint=res.endpoint, source=source, measured_at=res.started_at,
    )
