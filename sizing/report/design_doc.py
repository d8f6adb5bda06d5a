"""The capacity design document of `llmcap report`: the sections an infrastructure reviewer reads, in
order, built from typed inputs only (the Plan, the capacity table of plans per GPU type and user level,
the scale-up/scale-out sweeps, the arithmetic, the rollout stages and the model's fit record). Every
figure is formatted from those objects; none is typed or derived here.

Each section is one function `(DesignInputs) -> Section`; `SECTIONS` lists them in reading order, so
a new Plan field (request classes, purchase options, engines) slots into the function of its section.

Owns: the wording and layout of the document. Must not import matplotlib (the figures come in as SVG),
pulumi, boto3 or the planner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sizing.cost.money import HOURS_PER_MONTH
from sizing.humanize import num, plural, usd
from sizing.report.document import Bullets, Code, Document, Figure, Para, Section, Table
from sizing.report.format import money

if TYPE_CHECKING:
    from sizing.analysis.arithmetic import Arithmetic
    from sizing.analysis.capacity import CapacityCell, CapacityTable
    from sizing.analysis.comparison import Comparison, Sweep
    from sizing.measure.rollout import Stage
    from sizing.plan import Plan
    from sizing.report.plan_views import PlanText


@dataclass(frozen=True)
class FitRecord:
    """The performance model's fit as perf_calibration.json records it (shares, not percent)."""

    fitted_on: str
    source_file: str
    rows: int
    held_out: dict[str, float]
    goodput_range: tuple[float, float]


@dataclass
class DesignInputs:
    plan: Plan
    text: PlanText  # the plan's own views (sizing.report.plan_views.plan_text)
    stack_file: str
    capacity: CapacityTable
    purchase: list[CapacityCell]  # the stack planned at each purchase option
    arithmetic: Arithmetic
    stages: list[Stage]
    fit: FitRecord
    blast_radius: float  # share of capacity lost with the worst node
    comparison: Comparison | None = None  # scale-up vs scale-out, `llmcap compare --strategies` of the stack
    users_sweep: Sweep | None = None
    itl_sweep: Sweep | None = None
    figures: dict[str, Figure] = field(default_factory=dict)  # "users", "itl"


def _level(c: CapacityCell, plan: Plan) -> str:
    if c.concurrent_users:
        return f"{c.concurrent_users:,}"
    return f"the stack's {num(plan.workload.traffic.peak_requests_per_s or 0)} req/s"


def _cell_text(c: CapacityCell, plan: Plan) -> list[str]:
    if not c.feasible:
        return [_level(c, plan), "infeasible", "", "", "", "", "", c.reason]
    return [_level(c, plan), f"{c.instance_type} ({c.precision}, TP{c.tensor_parallel})",
            f"{c.replicas:,}", f"{c.gpus:,}", f"{c.instances:,}", money(c.usd_per_month),
            usd(c.usd_per_million_output_tokens, cents=True), ""]


CAPACITY_HEADERS = ["users", "deployment", "replicas", "GPUs", "instances", "$/month", "$/1M out", "why infeasible"]


def summary(d: DesignInputs) -> Section:
    p, t = d.plan, d.plan.totals
    r = p.pools[0].per_replica
    risk = ("the performance model's held-out throughput error is "
            f"{d.fit.held_out.get('throughput', 0.0):.0%}: goodput per replica may be "
            f"{num(r.goodput_output_tokens_per_s_p10)}–{num(r.goodput_output_tokens_per_s_p90)} "
            f"output tokens/s instead of {num(r.goodput_output_tokens_per_s)}, so the canary "
            f"stage measures it before full rollout; one node failure takes {d.blast_radius:.0%} of capacity")
    return Section("summary", "Summary", [Bullets([
        f"Buy: {d.text.headline}.",
        f"Cost: {money(t.usd_per_month)}/month for GPU instances, {money(t.all_in_usd_per_month)}/month all-in, "
        f"{usd(t.usd_per_million_output_tokens, cents=True)} per 1M output tokens at the planned load "
        f"({usd(t.all_in_usd_per_million_output_tokens, cents=True)} all-in).",
        f"Main risk: {risk}.",
    ])])


def requirements(d: DesignInputs) -> Section:
    w, p = d.plan.workload, d.plan
    s = w.slo
    targets = ", ".join(f"{m.upper()} {q} ≤ {num(v)} ms" for m, q, v in s.targets())
    rows = [
        ["model", p.model],
        ["precisions accepted", ", ".join(w.precision if isinstance(w.precision, list) else [w.precision])],
        ["request shape", f"{num(w.prompt_tokens.mean)} prompt tokens, {num(w.output_tokens.mean)} output tokens "
                          "(means)"],
        ["traffic", str(p.demand.get("formula", ""))],
        ["SLO", targets],
        ["region", p.region],
        ["purchase", p.purchase],
        ["strategy", p.strategy],
        ["redundancy", plural(p.hardware.redundancy, "spare replica")],
        ["budget", money(p.budget_usd_month) + "/month all-in" if p.budget_usd_month is not None else "not set"],
        ["stack file", d.stack_file],
    ]
    blocks: list[Para | Table | Bullets] = [Table(["requirement", "value"], rows)]
    if d.text.traffic_lines:
        blocks.append(Bullets(list(d.text.traffic_lines)))
    if d.text.class_rows:
        blocks.append(Table(d.text.class_headers, d.text.class_rows,
                            caption="Request classes: targets and the planned fleet's predicted percentiles"))
    if d.text.engine_rows:
        blocks.append(Table(d.text.engine_headers, d.text.engine_rows, caption="Best plan of each engine allowed"))
    return Section("requirements", "Requirements", list(blocks))


def _per_user_rate_note(plan: Plan) -> str:
    """Where a user level's per-user output rate comes from, when the stack's targets imply none."""
    from sizing.analysis.capacity import planned_tokens_per_s

    if plan.workload.traffic.tokens_per_s_per_user or plan.workload.tokens_per_s_per_user:
        return ""
    tps = planned_tokens_per_s(plan)
    return (f" The stack's targets imply no output rate per user (TTFT only), so each user at a level gets what "
            f"one active request gets at the stack's own planned load, {num(tps)} output tokens/s "
            "(`tokens_per_s_per_user` in each cell's --set)." if tps else "")


def capacity(d: DesignInputs) -> Section:
    blocks: list[Para | Table] = [Para(
        f"For each GPU type the catalog offers in {d.plan.region} and each user level, the cheapest plan "
        f"restricted to that GPU, with the stack's other settings. Each cell is `llmcap plan {d.stack_file} "
        "--set hardware.gpus=[GPU] --set workload.traffic.concurrent_users=N --format json`. $/month is GPU "
        "instances (730 h); $/1M out is GPU cost per million output tokens at the planned load."
        + _per_user_rate_note(d.plan))]
    levels = d.capacity.user_levels
    overview = [[g] + [f"{money(c.usd_per_month)} ({c.gpus:,} GPUs)" if c.feasible else "infeasible"
                       for c in (d.capacity.cell(g, n) for n in levels)] for g in d.capacity.gpus]
    blocks.append(Table(["GPU"] + [_level(d.capacity.cell(d.capacity.gpus[0], n), d.plan) + " users"
                                   if n else _level(d.capacity.cell(d.capacity.gpus[0], n), d.plan) for n in levels],
                        overview, caption="Overview: GPU $/month (GPUs) by concurrent users"))
    for g in d.capacity.gpus:
        rows = [_cell_text(d.capacity.cell(g, n), d.plan) for n in d.capacity.user_levels]
        blocks.append(Table(CAPACITY_HEADERS, rows, caption=g))
    return Section("capacity", "Capacity by hardware", list(blocks))


def _sweep_lines(sw: Sweep | None) -> list[str]:
    if sw is None:
        return []
    out = [c.text for c in sw.crossovers] + [e.text for e in sw.feasibility_edges]
    return out or [f"no crossover between {' and '.join(sw.series)} over {sw.label} "
                   f"{num(sw.values[0])}–{num(sw.values[-1])}"]


def _verdict(c: Comparison | None) -> list[Para | Table]:
    """The strategies compared at the stack's own traffic: the verdict and why, and each option's row."""
    if c is None:
        return []
    from sizing.analysis.comparison import OptionSummary

    rows = [[r.label, "; ".join(r.pools), f"{r.gpus:,}", money(r.usd_per_month),
             usd(r.usd_per_million_output_tokens, cents=True), f"{r.blast_radius:.0%}", f"{r.cold_start_s:,.0f} s"]
            if isinstance(r, OptionSummary) else [r.label, "infeasible: " + "; ".join(r.problems[-1:]), "", "", "",
                                                  "", ""] for r in c.options]
    head = f"Why: {c.winner} — {c.reason}." if c.winner else f"Why: {c.reason}."
    return [Para(head), Table(["strategy", "deployment", "GPUs", "$/month", "$/1M out", "one node lost",
                               "cold start"], rows, caption="Scale-up vs scale-out at the stack's traffic "
                                                            "(vLLM default batching, as llmcap compare)")]


def scale(d: DesignInputs) -> Section:
    p = d.plan
    lead = p.pools[0]
    blocks: list[Para | Bullets | Figure | Table] = [
        Para(f"Decision: {lead.instance_type} ({lead.gpu}, {lead.gpus_per_instance} per instance, "
             f"TP{lead.tensor_parallel}, {lead.precision}), chosen by {p.strategy} planning with tuned batching "
             "flags. The comparison and curves below plan each strategy with vLLM's default batching flags, as "
             "`llmcap compare` does, so their counts can be higher than the plan's."),
        *_verdict(d.comparison),
        Bullets(_sweep_lines(d.users_sweep) + _sweep_lines(d.itl_sweep)),
    ]
    for key in ("users", "itl"):
        if key in d.figures:
            blocks.append(d.figures[key])
    for sw in (d.users_sweep, d.itl_sweep):
        if sw is None:
            continue
        names = list(sw.series)
        rows = [[num(x)] + [money(sw.series[n][i].usd_per_month) if sw.series[n][i].feasible else "infeasible"
                            for n in names] for i, x in enumerate(sw.values)]
        blocks.append(Table([sw.label] + [f"{n} $/month" for n in names], rows,
                            caption=f"GPU $/month against {sw.label}"))
    return Section("scale", "Scale-up vs scale-out", list(blocks))


def arithmetic(d: DesignInputs) -> Section:
    a = d.arithmetic
    formulas = "\n".join([
        f"M_weight = params × bytes/param = {num(a.params_b)}e9 × {a.bytes_per_param:g} B "
        f"= {a.weights_gib_per_replica:,.2f} GiB per replica ({a.weights_gib_per_gpu:,.2f} GiB per GPU at "
        f"{a.gpus_per_replica} GPU{'s' if a.gpus_per_replica > 1 else ''})",
        f"M_KV per token = 2 × layers × kv_heads × head_dim × bytes = 2 × {a.num_layers} × {a.num_kv_heads} × "
        f"{a.head_dim} × {a.kv_dtype_bytes:g} = {a.kv_bytes_per_token_per_replica:,.0f} B per replica",
        f"M_KV per request = M_KV per token × {a.tokens_per_request:,} tokens = "
        f"{a.kv_gib_per_request_per_replica:,.4f} GiB",
        f"M_total per GPU = M_weight/GPU + M_KV per request × {num(a.planned_concurrency_per_replica)} planned "
        f"concurrent requests ÷ {a.gpus_per_replica} = {a.m_total_gib_per_gpu:,.2f} GiB of "
        f"{a.gpu_memory_gib:,.2f} GiB usable (KV budget {a.kv_cache_gib_per_gpu:,.2f} GiB per GPU)",
        f"goodput per replica at the SLO = {num(a.goodput_output_tokens_per_s_per_replica)} output tokens/s "
        f"(p10–p90 {num(a.goodput_range_per_replica[0])}–{num(a.goodput_range_per_replica[1])})",
        f"demand: {a.demand_formula}",
        f"replicas = ceil(demand ÷ goodput) + redundancy = {a.replicas_for_demand} + {a.redundancy_replicas} "
        f"= {a.replicas}",
    ])
    return Section("arithmetic", "The arithmetic", [
        Para(f"Pool {a.pool}: {a.gpu}, {a.precision}."), Code(formulas),
        Table(["figure", "source"], [[k, v] for k, v in a.sources.items()]),
        Table(d.text.pool_headers, d.text.pool_rows, caption="The plan's pools")])


def cost(d: DesignInputs) -> Section:
    p = d.plan
    lines = [[c.name, f"{num(c.quantity)} {c.unit}", money(c.usd_per_month), c.source] for c in p.cost_lines]
    purchase = [[c.sets[0].split("=", 1)[1]] + (
        [c.instance_type, f"{c.gpus:,}", money(c.usd_per_month), usd(c.usd_per_million_output_tokens, cents=True)]
        if c.feasible else ["infeasible", "", "", c.reason]) for c in d.purchase]
    be = [[a.provider, a.model, "–" if a.break_even_output_tokens_per_month is None
           else f"{a.break_even_output_tokens_per_month / 1e6:,.0f}M output tokens/month"] for a in p.api_comparison]
    blocks = [
        Table(["line", "quantity", "$/month", "source"], lines, caption="Every line of the plan"),
        Table(["figure", "value"], [list(r) for r in d.text.totals_rows], caption="Totals"),
        Table(["purchase", "deployment", "GPUs", "$/month", "$/1M out"], purchase,
              caption="Purchase options (the stack planned at each)"),
    ]
    if d.text.purchase_rows:
        blocks.append(Table(d.text.purchase_headers, d.text.purchase_rows,
                            caption="The planned fleet under each way of paying (each rate with its source and date)"))
    if p.api_comparison:
        blocks += [Table(d.text.api_headers, d.text.api_rows, caption="Hosted APIs for the same traffic"),
                   Table(["provider", "model", "break-even volume (self-hosting costs the same)"], be,
                         caption="Break-even monthly volume")]
    return Section("cost", "Cost", list(blocks))


def operations(d: DesignInputs) -> Section:
    p = d.plan
    auto = [[q.name, f"{q.instances_min}/{q.instances_desired}/{q.instances_max}", f"{q.replicas}/{q.replicas_max}",
             f"{q.per_replica.cold_start_s:,.0f} s"] for q in p.pools]
    failures = [
        ["a GPU node dies", "; ".join(d.text.redundancy_lines),
         f"one node is {d.blast_radius:.0%} of capacity; a second failure before the replacement is ready"],
        ["an AZ is lost", "node groups span every AZ offering the type; zone topology spread; ASG relaunch",
         "the spread is soft and redundancy counts nodes, not AZs"],
        ["spot reclaimed", f"purchase is {p.purchase}" + ("" if p.purchase == "on-demand" else
                                                          "; PDB and Cluster Autoscaler bring replacements"),
         "plain spot has no on-demand floor" if p.purchase == "spot" else "on-demand capacity is not reclaimed"],
        ["a rolling update", "maxUnavailable 0, maxSurge 1; PDB minAvailable = the demand's replicas",
         "a surge needs a free GPU node (node-group max headroom)"],
        ["weights bucket unreachable", "running replicas keep serving from GPU memory; new pods retry",
         "no second copy of the weights"],
    ]
    return Section("operations", "Operations", [
        Bullets(d.text.cold_start_lines),
        Table(["pool", "instances min/desired/max", "replicas planned/max", "cold start"], auto,
              caption="Autoscaling (KEDA on queue depth, Cluster Autoscaler on the node groups)"),
        Table(["failure", "what covers it", "where the cover stops"], failures, caption="Failure modes"),
        Bullets(["private, encrypted, versioned, TLS-only weights bucket", "IMDSv2 required on every node",
                 "least-privilege Pod Identity roles", "an API key on the endpoint (an empty key is refused)",
                 "internal load balancer unless public_endpoint (which then needs TLS and source CIDRs)",
                 "EKS API reachable only from listed CIDRs; secrets encrypted with KMS",
                 "policy pack (pulumi preview --policy-pack policy) and checkov on the manifests"]),
    ])


def rollout(d: DesignInputs) -> Section:
    blocks: list[Para | Table | Code] = [Para(
        f"Three stages; each passes only when every threshold holds (`llmcap verify RESULTS --stage NAME` exits 1 "
        f"naming the failing criterion). Throughput tolerance ±{d.stages[0].tolerance:.0%} comes from the "
        "model's held-out goodput range.")]
    for s in d.stages:
        blocks.append(Table(["criterion", "limit", "source"], [[t.criterion, t.limit, t.source] for t in s.thresholds],
                            caption=f"{s.name}: {s.what} ({plural(s.replicas, 'replica')}, "
                                    f"{s.demand_share:.0%} of demand)"))
        blocks.append(Code("\n".join(s.commands)))
    return Section("rollout", "Rollout plan and pass criteria", list(blocks))


def assumptions(d: DesignInputs) -> Section:
    return Section("assumptions", "Assumptions and data sources", [
        Bullets(list(d.plan.assumptions)), *([Bullets([f"warning: {w}" for w in d.plan.warnings])]
                                             if d.plan.warnings else [])])


def model_error(d: DesignInputs) -> Section:
    f = d.fit
    rows = [[k, f"{v:.1%}"] for k, v in f.held_out.items()]
    lead = d.plan.pools[0]
    lo, hi = f.goodput_range
    return Section("model-error", "Held-out model error and what it means", [
        Para(f"The performance model was fitted on {f.rows:,} published measurements ({f.source_file}) on "
             f"{f.fitted_on}. Held out one source at a time, its median absolute error is:"),
        Table(["metric", "held-out median error"], rows),
        Para(f"Goodput per replica carries the p10–p90 of measured ÷ predicted ({lo:g}× – {hi:g}×): for this plan "
             f"{num(lead.per_replica.goodput_output_tokens_per_s_p10)}–"
             f"{num(lead.per_replica.goodput_output_tokens_per_s_p90)} output tokens/s per replica; "
             f"GPU cost ranges {money(d.plan.totals.usd_per_month_min)}–{money(d.plan.totals.usd_per_month_max)}/"
             f"month between the node-group minimum and maximum ({HOURS_PER_MONTH:g} h). The canary stage measures "
             "goodput before the fleet is bought in full."),
    ])


SECTIONS: list[Callable[[DesignInputs], Section]] = [
    summary, requirements, capacity, scale, arithmetic, cost, operations, rollout, assumptions, model_error]


def design_document(d: DesignInputs) -> Document:
    p = d.plan
    return Document(title=f"Capacity design: {p.model} on AWS ({p.stack})",
                    subtitle=f"Generated by llmcap report from {d.stack_file}; region {p.region}; "
                             f"prices and data dated in 'Assumptions and data sources'.",
                    sections=[f(d) for f in SECTIONS])
