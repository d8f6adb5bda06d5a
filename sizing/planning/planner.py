"""The planner: the cheapest deployment that meets the SLO.

For a stack, every allowed instance type offered in the region × tensor parallelism (and
pipeline stages across nodes when no single node fits) × allowed precision is sized by the
performance model (sizing.planning.candidates). The cheapest feasible candidate wins; every rejected one
keeps its reason. Strategies:
- auto: all instance types; scale-up: the P family; scale-out: the G family;
- mixed: a cost-optimal mix of two pools (sizing.planning.mix), in the spirit of Mélange.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sizing.catalog.lookup import Catalog, ModelArch, load_catalog
from sizing.plan import Plan, Rejection
from sizing.planning.candidates import Evaluated, enumerate_candidates, evaluate
from sizing.planning.demand import Demand, demand_of
from sizing.spec import HardwareSpec, WorkloadSpec
from sizing.stack import Stack

STRATEGIES = ("auto", "scale-up", "scale-out", "mixed")
GoodputScale = Callable[[str, str, str], "tuple[float, str] | None"]


@dataclass
class Search:
    """All candidates of one strategy: the feasible ones sized, the rest with reasons."""

    strategy: str
    feasible: list[Evaluated]
    rejections: list[Rejection]

    @property
    def best(self) -> Evaluated | None:
        return min(self.feasible, key=_cost_key) if self.feasible else None


def _cost_key(e: Evaluated) -> tuple[float, int, float]:
    return (round(e.usd_per_hour, 6), e.gpus, -e.gp.output_tokens_per_s)


def search(cat: Catalog, model: ModelArch, w: WorkloadSpec, hw: HardwareSpec, region: str, strategy: str,
           demand: Demand, scale: GoodputScale | None = None) -> Search:
    """Evaluate every candidate allowed by `strategy` (mixed searches everything)."""
    rejections: list[Rejection] = []
    feasible: list[Evaluated] = []
    enum_strategy = "auto" if strategy == "mixed" else strategy
    purchase = "spot" if hw.purchase == "spot" else "on-demand"
    for cand in enumerate_candidates(cat, model, w, hw, region, enum_strategy, rejections):
        s = scale(cand.instance.gpu, w.engine, model.hf_id) if scale else None
        e = evaluate(cat, model, w, hw, region, purchase, demand, cand, rejections, s[0] if s else 1.0)
        if e is not None:
            feasible.append(e)
    return Search(strategy, feasible, rejections)


def default_goodput_scale() -> GoodputScale | None:
    """The user's measured calibration overlay (llmcap calibrate), when there is one."""
    from sizing.perf.overlay import load_overlay

    overlay = load_overlay()
    return overlay.goodput_scale if overlay else None


def plan_stack(stack: Stack, catalog: Catalog | None = None, strategy: str | None = None,
               goodput_scale: GoodputScale | None | bool = True, tune_batching: bool = True) -> Plan:
    """Plan a stack: the cheapest feasible deployment, its alternatives and costs.

    `tune_batching`: the cheapest feasible candidates get their max_num_batched_tokens and
    max_num_seqs tuned and their goodput checked by the step-level simulation (sizing.planning.batching).

    `goodput_scale=True` applies the user's calibration overlay if one exists; pass None to ignore it.
    Raises NoFeasiblePlanError with the reason per GPU type and what would make it feasible.
    """
    from sizing.planning.builder import build_plan, infeasible_error

    cat = catalog or load_catalog()
    cat.check_region(stack.region)
    w, hw = stack.workload, stack.hardware
    gap = cat.region_gap(stack.region, hw.purchase)
    if gap:
        from sizing.errors import NoFeasiblePlanError

        raise NoFeasiblePlanError(f"no data for {stack.region}", [gap])
    strat = strategy or hw.strategy
    from sizing.catalog.weights_source import workload_model

    model = workload_model(cat, w.model, w.weights_source)
    check_context(model, w)
    demand = demand_of(w)
    scale = default_goodput_scale() if goodput_scale is True else (goodput_scale or None)
    main = search(cat, model, w, hw, stack.region, strat, demand, scale)
    if not main.feasible:
        raise infeasible_error(cat, model, stack, strat, main, demand)
    if tune_batching:
        from sizing.planning.batching import tune_finalists

        main = Search(main.strategy, tune_finalists(cat, model, w, demand, main.feasible, hw.redundancy, _cost_key),
                      main.rejections)
    others = {s: search(cat, model, w, hw, stack.region, s, demand, scale)
              for s in ("scale-up", "scale-out") if s != strat} if strat != "auto" else {
        s: Search(s, [e for e in main.feasible if _strategy_of(e) == s], []) for s in ("scale-up", "scale-out")}
    return build_plan(cat, model, stack, strat, main, others, demand, scale)


def check_context(model: ModelArch, w: WorkloadSpec) -> None:
    """A context longer than the model's limit (config.json max_position_embeddings) is bad input."""
    from sizing.errors import SpecError
    from sizing.planning.meaning import context_problem

    problem = context_problem(model, w)
    if problem:
        raise SpecError(problem)


def _strategy_of(e: Evaluated) -> str:
    return "scale-up" if e.cand.instance.is_p_family else "scale-out"

