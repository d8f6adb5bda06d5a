"""`llmcap verify`: measured figures against the plan's predictions and the stack's SLO.

Pass/fail criteria (the staged-rollout gate), judged at the planned-load run:
  1-2. every target the stack's SLO sets (sizing.spec.Slo.targets(): TTFT, ITL, TPOT, E2E at p50, p90, p95,
       p99), e.g. TTFT p95 <= SLO, ITL p99 <= SLO, E2E p90 <= SLO
  3. error rate <= max (default 1%)
  4. goodput (output tokens/s of requests meeting the SLO, vLLM's definition) >= the plan's demand
     × the endpoint's demand share × (1 - tolerance)
  5. output tokens/s within ± tolerance of what the plan predicts at that load.
Each predicted figure also gets its gap in % (measured / predicted - 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.errors import SpecError
from sizing.spec import SLO_LABELS

if TYPE_CHECKING:
    from sizing.measure.metrics import RunMetrics
    from sizing.measure.results import BenchResults
    from sizing.plan import Plan


@dataclass(frozen=True)
class Criterion:
    name: str
    measured: float | None
    limit: float | None
    unit: str
    passed: bool | None  # None: informational (a gap only)
    predicted: float | None = None
    detail: str = ""

    @property
    def gap_pct(self) -> float | None:
        if self.measured is None or not self.predicted:
            return None
        return (self.measured / self.predicted - 1.0) * 100.0


def predicted_means(plan: Plan) -> tuple[float, float, float, float]:
    """(TTFT p95, ITL p95, TTFT mean, ITL mean) in ms across pools: p95s from the slowest pool (it sets
    the fleet's tail), means weighted by each pool's demand share."""
    pools = plan.pools
    if not pools:
        raise SpecError("the plan has no pools")
    w = sum(p.demand_share for p in pools) or 1.0
    ttft_mean = sum(p.per_replica.ttft_ms * p.demand_share for p in pools) / w
    itl_mean = sum(p.per_replica.itl_ms * p.demand_share for p in pools) / w
    return (max(p.per_replica.ttft_p95_ms for p in pools), max(p.per_replica.itl_p95_ms for p in pools),
            ttft_mean, itl_mean)


def predicted_output_tokens_per_s(run: RunMetrics, plan: Plan, output_tokens_mean: float,
                                  demand_share: float) -> float:
    """What the plan implies for this run's load: closed loop N × out / (TTFT + (out - 1) × ITL), open loop
    rate × out, each capped by the plan's goodput capacity for the endpoint's share."""
    _, _, ttft_ms, itl_ms = predicted_means(plan)
    if run.mode == "concurrency":
        e2e_s = (ttft_ms + max(output_tokens_mean - 1.0, 0.0) * itl_ms) / 1000.0
        rate = run.load * output_tokens_mean / e2e_s if e2e_s > 0 else float("inf")
    else:
        rate = run.load * output_tokens_mean
    return min(rate, plan.totals.capacity_output_tokens_per_s * demand_share)


def slo_targets(plan: Plan, run: RunMetrics) -> tuple[tuple[str, str, float], ...]:
    """The targets verify judges: every target bench recorded with the run (it records the stack's
    sizing.spec.Slo.targets()); for results written before bench recorded them all, the plan's targets with
    the run's recorded p95 values in place of the plan's."""
    if run.slo_targets:
        return run.targets()
    recorded = {(m, q): v for m, q, v in run.targets()}
    planned = plan.workload.slo.targets()
    out = [(m, q, recorded.pop((m, q), v)) for m, q, v in planned]
    return tuple(out + [(m, q, v) for (m, q), v in recorded.items()])


def criteria(res: BenchResults, plan: Plan, demand_share: float, max_error_rate: float,
             tolerance: float) -> tuple[RunMetrics, list[Criterion]]:
    run = res.planned_run()
    ttft_p95_pred, itl_p95_pred, _, _ = predicted_means(plan)
    out_mean = float(res.workload["output_tokens"]["mean"])
    demand = plan.totals.demand_output_tokens_per_s * demand_share
    pred_tput = predicted_output_tokens_per_s(run, plan, out_mean, demand_share)
    # a target the SLO does not set is not a criterion
    predicted = {("ttft", "p95"): ttft_p95_pred, ("itl", "p95"): itl_p95_pred}
    dists = {m: run.distribution(m) for m in ("ttft", "itl", "tpot", "e2e")}
    out: list[Criterion] = []
    for m, q, v in slo_targets(plan, run):  # every target the stack sets, through the one SLO model
        got = dists[m].at(q)
        # no ITL/TPOT sample: every output was one token, which no per-token target can miss
        ok = (got <= v) if got is not None else m in ("itl", "tpot")
        out.append(Criterion(f"{SLO_LABELS[m]} {q} <= SLO", got, v, "ms", ok, predicted.get((m, q))))
    out += [
        Criterion("error rate <= max", run.error_rate * 100.0, max_error_rate * 100.0, "%",
                  run.error_rate <= max_error_rate,
                  detail=", ".join(f"{k} ×{v}" for k, v in run.error_kinds.items())),
        Criterion("goodput >= planned demand", run.goodput_output_tokens_per_s, demand * (1.0 - tolerance),
                  "output tokens/s", run.goodput_output_tokens_per_s >= demand * (1.0 - tolerance), demand,
                  detail=f"demand share {demand_share:.3g}"),
        Criterion("output tokens/s within ±tolerance of predicted", run.output_tokens_per_s, None,
                  "output tokens/s", abs(run.output_tokens_per_s / pred_tput - 1.0) <= tolerance if pred_tput else
                  False, pred_tput, detail=f"±{tolerance:.0%}"),
    ]
    meeting = [r for r in res.runs if r.meets_slo]
    if meeting:
        best = max(meeting, key=lambda r: r.output_tokens_per_s)
        saturated = any(not r.meets_slo and r.load > best.load for r in res.runs)
        out.append(Criterion("goodput capacity (best run within SLO)", best.output_tokens_per_s, None,
                             "output tokens/s", None, plan.totals.capacity_output_tokens_per_s * demand_share,
                             detail=f"at {best.mode} {best.load:g}"
                             + ("" if saturated else "; a lower bound: no heavier run left the SLO")))
    return run, out


def check_inputs(demand_share: float, max_error_rate: float, tolerance: float) -> None:
    if not 0 < demand_share <= 1:
        raise SpecError(f"--demand-share: must be in (0, 1] (got {demand_share})")
    if not 0 <= max_error_rate <= 1:
        raise SpecError(f"--max-error-rate: must be in [0, 1] (got {max_error_rate})")
    if not 0 < tolerance < 1:
        raise SpecError(f"--tolerance: must be in (0, 1) (got {tolerance})")
