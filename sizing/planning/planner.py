"""The planner: the cheapest deployment that meets the SLO.

For a stack, every allowed instance type offered in the region × tensor parallelism (and
pipeline stages across nodes when no single node fits) × allowed precision is sized by the
performance model (sizing.planning.candidates). The cheapest feasible candidate wins; every rejected one
keeps its reason. Strategies:
- auto: all instance types; scale-up: the P family; scale-out: the G family;
- mixed: a cost-optimal mix of two pools (sizing.planning.mix), in the spirit of Mélange.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sizing.catalog.lookup import Catalog, load_catalog
from sizing.errors import SpecError
from sizing.planning.candidates import strategy_of
from sizing.planning.demand import demand_of
from sizing.planning.meaning import slo_floor_problems
from sizing.planning.problem import PlanningProblem
from sizing.planning.search import STRATEGIES, GoodputScale, Search, cost_key, search
from sizing.planning.time_budget import TimeBudget

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from sizing.catalog.records import ModelArch
    from sizing.plan import Plan
    from sizing.planning.candidates import Evaluated
    from sizing.spec import WorkloadSpec
    from sizing.stack import Stack


def plan_stack(stack: Stack, catalog: Catalog | None = None, strategy: str | None = None,
               goodput_scale: GoodputScale | None | bool = True, tune_batching: bool = True,
               time_budget: TimeBudget | None = None) -> Plan:
    """Plan a stack: the cheapest feasible deployment, its alternatives and costs.

    `tune_batching`: the cheapest feasible candidates get their max_num_batched_tokens and
    max_num_seqs tuned and their goodput checked by the step-level simulation (sizing.planning.batching).

    `goodput_scale=True` applies the user's calibration overlay if one exists; pass None to ignore it.
    A workload that allows several engines is planned once per engine and the cheapest plan is chosen
    (sizing.planning.engine_choice). Raises NoFeasiblePlanError with the reason per GPU type and what
    would make it feasible (the first engine's, when no engine has a feasible plan).

    `time_budget`: the search's wall-clock limit, shared by every engine (default: the stack's
    hardware.search_budget_s, sizing.planning.time_budget); a plan it cut says so in its warnings.
    """
    budget = (time_budget or TimeBudget(stack.hardware.search_budget_s)).start()
    engines = stack.workload.engines
    if len(engines) == 1:
        return _plan_engine(stack, catalog, strategy, goodput_scale, tune_batching, budget)
    from sizing.errors import NoFeasiblePlanError
    from sizing.planning.engine_choice import choose

    plans: dict[str, Plan] = {}
    failures: dict[str, NoFeasiblePlanError] = {}
    for e in engines:
        one = replace(stack, workload=stack.workload.for_engine(e))
        try:
            plans[e] = _plan_engine(one, catalog, strategy, goodput_scale, tune_batching, budget)
        except NoFeasiblePlanError as err:
            failures[e] = err
    if not plans:
        raise failures[engines[0]]
    return choose(stack.workload, plans, failures)


def _plan_engine(stack: Stack, catalog: Catalog | None, strategy: str | None,
                 goodput_scale: GoodputScale | None | bool, tune_batching: bool, budget: TimeBudget) -> Plan:
    """plan_stack for a workload of one engine, within `budget`."""
    from sizing.planning.builder import build_plan
    from sizing.planning.infeasible import infeasible_error

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
    floors = slo_floor_problems(w, cat)
    if floors:
        raise SpecError(f"{len(floors)} target(s) below what any deployment can do", floors)
    problem = PlanningProblem(cat, model, w, hw, stack.region, demand_of(w), budget)
    demand = problem.demand
    if goodput_scale is True:
        from sizing.perf.overlay import default_goodput_scale

        goodput_scale = default_goodput_scale()
    scale = goodput_scale or None
    main = search(problem, strat, scale)
    if not main.feasible and budget.cut:
        from sizing.errors import NoFeasiblePlanError

        raise NoFeasiblePlanError(f"no feasible fleet found before the search was cut at {budget.seconds:g} s",
                                  [budget.note() or "", "raise hardware.search_budget_s (or --search-budget), or "
                                   "narrow hardware.gpus / workload.precision"])
    if not main.feasible:
        err = infeasible_error(cat, model, stack, strat, main,
                               lambda w2, hw2, s: cheapest_tuned(problem.with_specs(w2, hw2), s))
        if budget.note():  # the suggestions' re-plans ran out of time: fewer of them, said so
            err.problems.append(budget.note() or "")
        raise err
    check_redundancy(hw.redundancy, main)
    if tune_batching:
        from sizing.planning.batching import tune_finalists

        main = Search(main.strategy, tune_finalists(problem, main.feasible, cost_key),
                      main.rejections)
    fleet = None
    if (w.classes or stack.trace is not None) and budget.expired():
        budget.skipped("the replay of the traffic over the finalists")
    elif w.classes or stack.trace is not None:  # replay the traffic over the finalists (issue 33)
        from sizing.perf.replay import replay
        from sizing.planning.fleet import replayed_finalists

        feas, fleet = replayed_finalists(problem, main.feasible, cost_key, stack.trace,
                                         w.trace.routing if w.trace else None, replay)
        main = Search(main.strategy, feas, main.rejections)
    others = {s: search(problem, s, scale)
              for s in ("scale-up", "scale-out") if s != strat} if strat != "auto" else {
        s: Search(s, [e for e in main.feasible if strategy_of(e.cand.instance) == s], [])
        for s in ("scale-up", "scale-out")}
    from sizing.planning.class_results import attach

    by_class = fleet.replicas_by_class if fleet is not None and fleet.layout == "dedicated" else None
    plan = attach(build_plan(cat, model, stack, strat, main, others, demand, scale, by_class, fleet is not None),
                  stack, fleet, stack.trace)
    tie = tie_note(main)
    if tie:
        plan.assumptions.append(tie)
    cut = budget.note()
    if cut and cut not in plan.warnings:
        plan.warnings.append(cut)
    return plan


def tie_note(main: Search) -> str | None:
    """One line when another feasible option costs the same with as many GPUs: which was chosen and why
    (search.cost_key's risk order), so that a tie is never decided silently."""
    best = main.best
    if best is None:
        return None
    same = [e for e in main.feasible if e is not best and cost_key(e)[:2] == cost_key(best)[:2]
            and (e.cand.instance.instance_type, e.cand.precision) != (best.cand.instance.instance_type,
                                                                       best.cand.precision)]
    if not same:
        return None
    other = min(same, key=cost_key)
    why = ("fewer nodes" if best.instances < other.instances else
           "the higher precision (larger weights)" if best.fit.weights_gib > other.fit.weights_gib else "more goodput")
    return (f"tie: {best.cand.label()} and {other.cand.label()} cost the same with {best.gpus} GPUs; chose "
            f"{best.cand.label()} for {why}")


def check_redundancy(redundancy: int, main: Search) -> None:
    """More spares than max(REDUNDANCY_ALWAYS_ALLOWED, the demand's replicas on the cheapest candidate) is bad
    input (sizing.spec REDUNDANCY_ALWAYS_ALLOWED)."""
    from sizing.planning.meaning import redundancy_problem
    from sizing.spec import REDUNDANCY_ALWAYS_ALLOWED

    best = main.best
    if best is not None and redundancy > max(REDUNDANCY_ALWAYS_ALLOWED, best.replicas_for_demand):
        raise SpecError(redundancy_problem(redundancy, best.replicas_for_demand,
                                           f"replicas for the demand on {best.cand.label()}"))


def check_context(model: ModelArch, w: WorkloadSpec) -> None:
    """A context longer than the model's limit (config.json max_position_embeddings) is bad input."""
    from sizing.planning.meaning import context_problem

    problem = context_problem(model, w)
    if problem:
        raise SpecError(problem)


def plan_for(stack_file: Path, sets: list[str] | None = None, strategy: str | None = None,
             catalog: Path | None = None) -> Plan:
    """Load, validate and plan a stack file (shared by plan, render, diff, compare, preflight)."""
    from sizing.catalog.names import check_names
    from sizing.errors import SpecError
    from sizing.stack import load_stack

    if strategy is not None and strategy not in STRATEGIES:
        raise SpecError(f"--strategy: {strategy!r} is not one of {', '.join(STRATEGIES)}")
    stack = load_stack(stack_file, sets)
    cat = load_catalog(catalog)
    check_names(stack, cat)
    return plan_validated(stack, cat, strategy)


def plan_validated(stack: Stack, cat: Catalog, strategy: str | None = None) -> Plan:
    """The one planner behind `plan` and `compare` (options and --strategies): the same search, batching
    flags tuned and finalists simulated, the calibration overlay applied, the stack's own warnings added;
    so both commands give one answer to one question (tests/test_compare_agrees.py)."""
    p = plan_stack(stack, cat, strategy)
    p.warnings.extend(w for w in stack.warnings if w not in p.warnings)
    return p


def default_planner(catalog_dir: Path | None = None) -> Callable[..., Plan]:
    """A planner of stack files from their text, `(stack name, text, source, trace_at) -> Plan`, with the
    bundled calibration only, so both sides of a cost diff plan alike (sizing.analysis.diff.Planner);
    `trace_at` reads the stack's trace at the side's ref."""

    def plan_text(name: str, text: str, source: str, trace_at: Callable[[str], Path] | None = None) -> Plan:
        from sizing.catalog.lookup import load_catalog
        from sizing.catalog.names import check_names
        from sizing.stack import config_from_text, stack_from_config

        stack = stack_from_config(name, config_from_text(text, source), source, trace_at=trace_at)
        cat = load_catalog(catalog_dir)
        check_names(stack, cat)
        return plan_stack(stack, cat, None, goodput_scale=None)

    return plan_text


def cheapest_tuned(p: PlanningProblem, strategy: str) -> Evaluated | None:
    """The cheapest feasible candidate for a problem, priced as plan_stack prices it: searched, then the
    finalists' batching flags tuned and simulated."""
    from sizing.planning.batching import tune_finalists

    found = search(p, strategy).feasible
    tuned = tune_finalists(p, found, cost_key) if found else []
    return min(tuned, key=cost_key) if tuned else None
