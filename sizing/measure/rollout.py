"""The staged rollout of a plan: canary (one replica) → ten percent → full, each with the commands that
check it and the thresholds it must pass (`llmcap rollout STACK`, `llmcap verify --stage NAME`, and the
rollout section of `llmcap report`).

Thresholds come from the plan and the performance model's fit, never typed here:
  - TTFT p95 and ITL p95 at most the stack's SLO (the promise the plan was sized for);
  - error rate at most `MAX_ERROR_RATE`;
  - goodput and output tokens/s within ± the throughput tolerance of the plan's prediction for the
    stage's share of the demand: the wider side of the held-out goodput range (perf_calibration.json
    `goodput_range`, p10/p90 of measured ÷ predicted with each source held out), so a deployment that
    is only as far off as four in five held-out published benchmarks passes;
  - the quality gate (`llmcap eval`) before a quantized checkpoint takes users' traffic.

Owns: the stages, their demand shares and thresholds. Pure: no network, no CLI.
Units: shares 0..1, latencies ms, tolerance a fraction of the predicted figure.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from sizing.errors import SpecError
from sizing.spec import SLO_LABELS

if TYPE_CHECKING:
    from sizing.catalog.calibration import Calibration
    from sizing.plan import Plan

# the share of failed requests a stage may have; the same default as `llmcap verify --max-error-rate`
MAX_ERROR_RATE = 0.01
TEN_PERCENT = 0.10  # the middle stage's share of the traffic
STAGE_NAMES = ("canary", "ten-percent", "full")


class Threshold(BaseModel):
    model_config = ConfigDict(extra="forbid")

    criterion: str  # as `llmcap verify` names it
    limit: str  # the limit in words, with its unit
    source: str  # where the limit comes from


class Stage(BaseModel):
    """One rollout stage: how much of the fleet takes traffic, and what must pass before the next."""

    model_config = ConfigDict(extra="forbid")

    name: str  # one of STAGE_NAMES
    what: str
    replicas: int  # replicas taking traffic in this stage
    demand_share: float  # share of the plan's demand those replicas carry (0..1)
    tolerance: float  # allowed gap of goodput and throughput to the prediction, fraction
    max_error_rate: float
    commands: list[str]
    thresholds: list[Threshold]


def throughput_tolerance(cal: Calibration) -> float:
    """The wider side of the held-out goodput range (p10, p90 of measured ÷ predicted), a fraction."""
    p10, p90 = cal.goodput_range
    tol = max(1.0 - p10, p90 - 1.0)
    if not 0 < tol < 1:
        raise SpecError(f"perf_calibration.json goodput_range ({p10}, {p90}) gives no usable tolerance")
    return round(tol, 3)


def _shares(plan: Plan) -> list[tuple[str, str, int, float]]:
    demand_replicas = max(sum(p.replicas_for_demand for p in plan.pools), 1)
    ten = max(1, math.ceil(TEN_PERCENT * demand_replicas))
    return [
        ("canary", "one replica behind its own endpoint, no user traffic until it passes", 1,
         min(1.0, 1 / demand_replicas)),
        ("ten-percent", f"{ten} of {demand_replicas} demand replicas take their share of user traffic "
                        f"(at least {TEN_PERCENT:.0%})", ten,
         min(1.0, ten / demand_replicas)),
        ("full", f"every replica ({sum(p.replicas for p in plan.pools)} with the spares) takes all traffic",
         sum(p.replicas for p in plan.pools), 1.0),
    ]


def stages(plan: Plan, cal: Calibration, stack_file: str = "STACK") -> list[Stage]:
    """The three stages of rolling out `plan`, each with its commands and thresholds."""
    tol = throughput_tolerance(cal)
    slo = plan.workload.slo
    held = cal.fit_error.get("held_out", {})
    fit = (f"perf_calibration.json fitted {cal.fitted_on}: goodput range p10 {cal.goodput_range[0]:g}× – "
           f"p90 {cal.goodput_range[1]:g}× held out (median throughput error "
           f"{float(held.get('throughput', 0.0)):.1%})")
    out: list[Stage] = []
    for name, what, replicas, share in _shares(plan):
        results = f"{name}.json"
        cmds = [f"llmcap bench $ENDPOINT --stack {stack_file} --replicas {replicas} --out {results}"]
        if name == "canary":
            cmds.append("llmcap eval $ENDPOINT --reference $REFERENCE_ENDPOINT --max-drop 1 --format json > eval.json")
        cmds.append(f"llmcap verify {results} --stack {stack_file} --stage {name}"
                    + (" --eval eval.json" if name == "canary" else ""))
        thresholds = [
            *(Threshold(criterion=f"{SLO_LABELS[m]} {q} <= SLO", limit=f"{v:g} ms", source="the stack's SLO")
              for m, q, v in slo.targets()),  # every target it sets, as verify judges them
            Threshold(criterion="error rate <= max", limit=f"{MAX_ERROR_RATE:.0%} of requests",
                      source="llmcap verify's default"),
            Threshold(criterion="goodput >= planned demand",
                      limit=f"{plan.totals.demand_output_tokens_per_s * share * (1 - tol):,.0f} output tokens/s "
                            f"({share:.3g} of the demand × (1 − {tol:g}))", source=fit),
            Threshold(criterion="output tokens/s within ±tolerance of predicted", limit=f"±{tol:.0%}", source=fit),
        ]
        if name == "canary":
            thresholds.append(Threshold(
                criterion="quality: accuracy drop <= max drop",
                limit="1 point on GSM8K exact match (llmcap eval --max-drop)",
                source="the same evaluation set as the full-precision reference"))
        out.append(Stage(name=name, what=what, replicas=replicas, demand_share=round(share, 6), tolerance=tol,
                         max_error_rate=MAX_ERROR_RATE, commands=cmds, thresholds=thresholds))
    return out


def stage(plan: Plan, cal: Calibration, name: str) -> Stage:
    for s in stages(plan, cal):
        if s.name == name:
            return s
    raise SpecError(f"--stage: {name!r} is not one of {', '.join(STAGE_NAMES)}")
