"""Compare deployment options (stacks, or strategies of one stack): a Plan per option, a summary
row each (GPUs, $/month, $/1M tokens, SLO headroom, blast radius, cold start), a verdict with its
reason: a `Comparison` (sizing.analysis.comparison, the versioned `llmcap compare --format json`
document, which gains the sweep of sizing.analysis.sweep when one is asked for).

Owns: option evaluation, identical deployments, the verdict. Must not import
matplotlib (sizing.report.plot does, only when a plot is asked for), pulumi or boto3.

Units: $/hour and $/month (730 h) are GPU instances of the whole deployment (every pool);
`all_in_usd_per_month` adds the platform; latencies in ms, the slowest pool's; headroom and blast
radius are shares (0..1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sizing.analysis.comparison import Comparison, InfeasibleOption, Option, OptionRow, OptionSummary
from sizing.cost.money import SECONDS_PER_MONTH
from sizing.errors import NoFeasiblePlanError
from sizing.humanize import num

if TYPE_CHECKING:
    from sizing.plan import Plan
    from sizing.spec import Slo

# ---------------------------------------------------------------- one plan per option


def blast_radius(plan: Plan) -> float:
    """Share of goodput capacity lost when one node fails (the worst node of any pool).

    A node holds replicas_per_instance replicas; a multi-node (pipeline) replica dies with any of its nodes."""
    total = sum(p.replicas * p.per_replica.goodput_output_tokens_per_s for p in plan.pools)
    if total <= 0:
        return 1.0
    worst = max((1 if p.nodes_per_replica > 1 else min(p.replicas_per_instance, p.replicas))
                * p.per_replica.goodput_output_tokens_per_s for p in plan.pools)
    return min(worst / total, 1.0)


def cold_start_s(plan: Plan) -> float:
    """A new replica on a new node until it serves (the slowest pool), seconds: node boot, image pull,
    weights and engine start (sizing/perf/cold_start.py)."""
    from sizing.perf.cold_start import cold_start

    return round(max(cold_start(p).total_s for p in plan.pools), 1)


def _headroom(measured_ms: float, target_ms: float) -> float:
    """1 - measured / target (negative: over the target); 0 without a target."""
    return round(1.0 - measured_ms / target_ms, 4) if target_ms > 0 else 0.0


def _slo_figure(plan: Plan, metric: str, q: str, target_ms: float) -> str:
    """One target's prediction (the slowest pool's, ms) and headroom, e.g. "TTFT p95 450 ms (55%)"."""
    from sizing.spec import SLO_LABELS

    pred = max(p.per_replica.percentile(metric, q) for p in plan.pools)
    return f"{SLO_LABELS[metric]} {q} {num(pred)} ms ({_headroom(pred, target_ms):.0%})"


def slo_figures(plan: Plan, slo: Slo) -> tuple[list[str], float]:
    """Each target's prediction and headroom, and the tightest headroom. A plan from replayed traffic
    (request classes or a trace: `plan.fleet`) is judged per class on its own targets ("rag: TTFT p95
    14,005 ms (30%)"; a p90 target against the class's p95, which is never below it), not one class's
    figure against another's target; else the slowest pool's figure against the stack's targets."""
    from sizing.spec import SLO_LABELS

    if plan.fleet is not None and any(c.targets for c in plan.classes):
        figs, heads = [], []
        for c in plan.classes:
            for t in c.targets:
                pct = getattr(c, f"{t.metric}_ms")
                pred = float(getattr(pct, "p95" if t.percentile == "p90" else t.percentile))
                heads.append(_headroom(pred, t.ms))
                figs.append(f"{c.name}: {SLO_LABELS[t.metric]} {t.percentile} {num(pred)} ms ({heads[-1]:.0%})")
        return figs, min(heads)
    return ([_slo_figure(plan, m, q, v) for m, q, v in slo.targets()],
            min((_headroom(p.per_replica.percentile(m, q), v) for m, q, v in slo.targets() for p in plan.pools),
                default=0.0))


def summarize(option: Option, plan: Plan) -> OptionSummary:
    """One option's row: the Plan's figures every view shows, plus blast radius and cold start."""
    totals, slo = plan.totals, option.stack.workload.slo
    lead = plan.pools[0]
    capacity_after_node_loss = totals.capacity_output_tokens_per_s * (1 - blast_radius(plan))
    figures, headroom = slo_figures(plan, slo)
    return OptionSummary(
        label=option.label, stack=option.stack.name, strategy=plan.strategy, model=plan.model,
        pools=[f"{p.instances_desired}× {p.instance_type} ({p.replicas} replicas of {p.gpu} "
               f"×{p.tensor_parallel * p.pipeline_parallel}, {p.precision}"
               f"{', ' + p.engine if p.engine != 'vllm' else ''})" for p in plan.pools],  # a non-default engine
        gpu=lead.gpu, instance_type=lead.instance_type, precision=lead.precision,
        gpus=totals.gpus, instances=totals.instances, usd_per_hour=totals.usd_per_hour,
        usd_per_month=totals.usd_per_month, all_in_usd_per_month=totals.all_in_usd_per_month,
        usd_per_million_output_tokens=totals.usd_per_million_output_tokens,
        usd_per_million_output_tokens_at_capacity=totals.usd_per_million_output_tokens_at_capacity,
        slo_figures=figures, slo_headroom=headroom,
        blast_radius=round(blast_radius(plan), 4),
        survives_node_loss=capacity_after_node_loss >= totals.demand_output_tokens_per_s - 1e-6,
        cold_start_s=cold_start_s(plan), utilization=totals.utilization,
        # the API's bill for the same traffic (input and output tokens) per 1M output tokens
        cheapest_api_usd_per_million_output_tokens=min(
            (round(a.usd_per_month_same_traffic / out_mtok, 4) for a in plan.api_comparison), default=None)
        if (out_mtok := totals.demand_output_tokens_per_s * SECONDS_PER_MONTH / 1e6) > 0 else None,
        warnings=plan.warnings)


def infeasible_summary(option: Option, err: NoFeasiblePlanError) -> InfeasibleOption:
    return InfeasibleOption(label=option.label, stack=option.stack.name, strategy=option.strategy,
                            problems=err.problems, suggestions=err.suggestions)


def compare_options(options: list[Option], plan_option: Callable[[Option], Plan]) -> Comparison:
    """Plan every option with `plan_option` (infeasible ones keep their reasons) and pick the winner.
    The CLI plans them with vLLM's default batching flags (no tuning or simulation of finalists,
    sizing.planning.batching), the same model the --sweep points use, so that a comparison and its
    sweep agree."""
    rows: list[OptionRow] = []
    for o in options:
        try:
            plan = plan_option(o)
        except NoFeasiblePlanError as e:
            rows.append(infeasible_summary(o, e))
            continue
        rows.append(summarize(o, plan))
    mark_identical(rows)
    winner, reason = verdict(rows)
    return Comparison(options=rows, winner=winner, reason=reason)


def _deployment_key(r: OptionSummary) -> tuple[Any, ...]:
    """What makes two options the same deployment; a row without pools is never the same as another."""
    return (r.model, tuple(r.pools or [id(r)]), round(r.usd_per_month, 2))


def mark_identical(rows: list[OptionRow]) -> None:
    """`same_as`: the label of an earlier option with the same model, pools and cost (e.g. `mixed` that
    found no cheaper mix than one pool), so the views say "identical" instead of comparing a plan to itself."""
    seen: dict[tuple[Any, ...], str] = {}
    for r in rows:
        if not isinstance(r, OptionSummary):
            continue
        key = _deployment_key(r)
        if key in seen:
            r.same_as = seen[key]
        else:
            seen[key] = r.label


def _pct_differs(a: float, b: float) -> bool:
    """Whether two shares differ as printed (whole percent): no "(4% vs 4%)" verdicts."""
    return f"{a:.0%}" != f"{b:.0%}"


def verdict(rows: list[OptionRow]) -> tuple[str | None, str]:
    """The cheapest feasible option by $/month (ties: smaller blast radius); the reason in one sentence."""
    ok = sorted((r for r in rows if isinstance(r, OptionSummary)),
                key=lambda r: (round(r.usd_per_month, 2), r.blast_radius, r.gpus))
    bad = [r.label for r in rows if isinstance(r, InfeasibleOption)]
    if not ok:
        return None, "no option has a plan that meets the SLO: " + "; ".join(
            f"{r.label}: {r.problems[-1]}" for r in rows if isinstance(r, InfeasibleOption))
    win = ok[0]
    parts: list[str] = []
    models = sorted({r.model for r in ok if r.model})
    if len(models) > 1:
        parts.append("the options serve different models (" + ", ".join(
            f"{r.label}: {r.model}" for r in ok) + "), so the cheaper one is a substitute only if its "
            "model is good enough")
    same = [r.label for r in ok[1:] if _deployment_key(r) == _deployment_key(win)]
    if same:
        parts.append(f"{win.label} and {', '.join(same)} are the identical deployment ({'; '.join(win.pools)})")
    rest = [r for r in ok[1:] if r.label not in same]
    if rest:
        nxt = rest[0]
        saving_usd_per_month = nxt.usd_per_month - win.usd_per_month
        if saving_usd_per_month > 0.005:
            pct = saving_usd_per_month / nxt.usd_per_month
            parts.append(f"{win.label} costs ${saving_usd_per_month:,.0f}/month less than {nxt.label} "
                         f"({f'{pct:.0%}' if pct >= 0.005 else 'under 1%'} cheaper: "
                         f"${win.usd_per_month:,.0f} vs ${nxt.usd_per_month:,.0f})")
        elif _pct_differs(win.blast_radius, nxt.blast_radius):
            parts.append(f"{win.label} costs the same as {nxt.label} and loses less capacity when a node "
                         f"fails ({win.blast_radius:.0%} vs {nxt.blast_radius:.0%})")
        else:
            fewer = "fewer" if win.gpus < nxt.gpus else "as many"
            parts.append(f"{win.label} costs the same as {nxt.label} and loses as much capacity when a node "
                         f"fails ({win.blast_radius:.0%}); it has {fewer} GPUs")
        if win.blast_radius > nxt.blast_radius and _pct_differs(win.blast_radius, nxt.blast_radius):
            parts.append(f"but one node failure takes {win.blast_radius:.0%} of its capacity "
                         f"(vs {nxt.blast_radius:.0%})")
    elif not same:
        parts.append(f"{win.label} is the only option that meets the SLO")
    if not win.survives_node_loss:
        parts.append("and it cannot carry the full demand after losing one node")
    if bad:
        parts.append(f"no plan meets the SLO for {', '.join(bad)}")
    return win.label, "; ".join(parts)
