"""Several engines allowed (`llmcap:workload.engine: [vllm, sglang]`): each engine's best plan, planned with
its own performance model, batching flags and memory layout (sizing/data/engines.csv), and the choice
between them: the cheapest all-in monthly cost that meets the SLO, then the higher goodput per replica.

The chosen plan keeps the stack's workload as written (its fingerprint is the saved plan's) and lists
every engine's best in `Plan.engines` with why it was or was not chosen. Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sizing.plan import EngineChoice

if TYPE_CHECKING:
    from sizing.errors import NoFeasiblePlanError
    from sizing.plan import Plan
    from sizing.spec import WorkloadSpec


def choice_of(engine: str, plan: Plan) -> EngineChoice:
    """One engine's best plan, as the comparison shows it."""
    lead = max(plan.pools, key=lambda p: p.demand_share)
    return EngineChoice(
        engine=engine, feasible=True, gpu=lead.gpu, instance_type=lead.instance_type, precision=lead.precision,
        tensor_parallel=lead.tensor_parallel, replicas=sum(p.replicas for p in plan.pools), gpus=plan.totals.gpus,
        goodput_output_tokens_per_s_per_replica=lead.per_replica.goodput_output_tokens_per_s,
        usd_per_month=plan.totals.usd_per_month, all_in_usd_per_month=plan.totals.all_in_usd_per_month,
        usd_per_million_output_tokens=plan.totals.usd_per_million_output_tokens, why="")


def _rank(plan: Plan) -> tuple[float, float]:
    return (plan.totals.all_in_usd_per_month, -max(p.per_replica.goodput_output_tokens_per_s for p in plan.pools))


def choose(workload: WorkloadSpec, plans: dict[str, Plan], failures: dict[str, NoFeasiblePlanError]) -> Plan:
    """The cheapest engine's plan with every engine's best in `engines`; `plans` holds at least one."""
    best_engine = min(plans, key=lambda e: _rank(plans[e]))
    best = plans[best_engine]
    cost = best.totals.all_in_usd_per_month
    rows: list[EngineChoice] = []
    for e in workload.engines:
        if e in failures:
            err = failures[e]
            first = err.problems[0] if err.problems else str(err)
            rows.append(EngineChoice(engine=e, feasible=False, why=f"no feasible plan: {first}"))
            continue
        row = choice_of(e, plans[e])
        other = plans[e].totals.all_in_usd_per_month
        if e == best_engine:
            runner = [plans[o].totals.all_in_usd_per_month for o in plans if o != e]
            if not runner:
                why = "the only engine with a feasible plan"
            elif min(runner) == cost:
                why = "tied on cost; more goodput per replica"
            else:
                why = f"cheapest; the next engine costs {min(runner) / cost - 1:.0%} more all-in"
            rows.append(row.model_copy(update={"chosen": True, "why": why}))
        else:
            why = (f"{other / cost - 1:.0%} dearer all-in than {best_engine}" if other > cost
                   else f"tied with {best_engine}; less goodput per replica")
            rows.append(row.model_copy(update={"why": why}))
    chosen_line = next(r for r in rows if r.chosen)
    return best.model_copy(update={
        "workload": workload, "engines": rows,
        "assumptions": [*best.assumptions, f"engines compared: {', '.join(workload.engines)}; {best_engine} "
                        f"chosen ({chosen_line.why})"]})
