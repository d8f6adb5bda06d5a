"""The Plan as a rich table (terminal) and as markdown (PR comments, docs)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sizing.cost.money import HOURS_PER_MONTH
from sizing.humanize import num, plural, usd
from sizing.perf.binding import LABELS
from sizing.perf.cold_start import cold_start
from sizing.report.format import md_table, money
from sizing.report.traffic_views import CLASS_HEADERS, class_lines, class_rows, fleet_lines, trace_lines
from sizing.spec import SLO_LABELS

if TYPE_CHECKING:
    from sizing.plan import PerReplica, Plan, Pool


# Below this console width the pool table is laid out vertically (key: value per pool), as gh and
# Infracost do; the other tables drop their least useful columns.
WIDE_COLUMNS = 150


def _targets(plan: Plan) -> tuple[tuple[str, str, float], ...]:
    """The SLO's targets: exactly those the stack set (sizing.spec.Slo.targets), one column or line each."""
    return plan.workload.slo.targets()


def _pool_targets(plan: Plan, p: Pool) -> tuple[tuple[str, str, float], ...]:
    """A pool's targets: its request class's own (a dedicated layout's class pool), else the stack's."""
    own = next((c for c in plan.workload.classes or [] if c.name == p.request_class), None) if p.request_class else None
    return own.slo.targets() if own is not None and not own.is_batch else _targets(plan)


def _pool_cell(plan: Plan, p: Pool, m: str, q: str) -> str:
    """Predicted / target for one (metric, percentile) column of the pool table; a class pool whose class
    sets no such target shows its prediction against "–"."""
    v = next((v for m2, q2, v in _pool_targets(plan, p) if (m2, q2) == (m, q)), None)
    return f"{num(p.per_replica.percentile(m, q))} / {num(v) if v is not None else '–'}"


def precision_label(precision: str, gpu: str) -> str:
    """The precision as it runs on this GPU: `fp8 (weight-only)` where the GPU has no FP8 tensor cores
    (Ampere runs FP8 weights through FP8 Marlin with 16-bit math: precisions.csv fallback_on_other_archs)."""
    from sizing.catalog.lookup import load_catalog
    from sizing.errors import LlmcapError

    try:
        cat = load_catalog()
        fmt, g = cat.precision(precision), cat.gpu(gpu)
    except (LlmcapError, KeyError):
        return precision
    if fmt.native_activation_archs and g.generation not in fmt.native_activation_archs \
            and fmt.fallback_on_other_archs == "weight-only":
        return f"{precision} (weight-only)"
    return precision


def _parallel(p: Pool) -> str:
    return f"TP{p.tensor_parallel}" + (f"×PP{p.pipeline_parallel}" if p.pipeline_parallel > 1 else "")


def headline(plan: Plan) -> str:
    t = plan.totals
    pools = " + ".join(
        f"{p.instances_desired}× {p.instance_type} ({plural(p.replicas, 'replica')} of "
        f"{p.tensor_parallel}{'×' + str(p.pipeline_parallel) if p.pipeline_parallel > 1 else ''} {p.gpu}, "
        f"{precision_label(p.precision, p.gpu)}, {p.purchase})" for p in plan.pools)
    if plan.engines or any(p.engine != "vllm" for p in plan.pools):
        pools += f" on {', '.join(sorted({p.engine for p in plan.pools}))}"
    return (f"{plan.model} in {plan.region}: {pools} = {plural(t.gpus, 'GPU')}, {money(t.usd_per_hour, 2)}/h, "
            f"{money(t.usd_per_month)}/month, {usd(t.usd_per_million_output_tokens, cents=True)} per 1M output tokens")


def spare_instances(p: Pool) -> int:
    """Instances beyond those the demand's replicas need: the spares, in whole nodes."""
    if p.pipeline_parallel > 1:
        need = p.replicas_for_demand * p.pipeline_parallel
    else:
        need = math.ceil(p.replicas_for_demand / max(p.replicas_per_instance, 1))
    return max(p.instances_desired - need, 0)


def redundancy_line(p: Pool) -> str:
    """What the spares are and cost; why a whole node when one node holds several replicas."""
    spares = spare_instances(p)
    if p.redundancy_replicas == 0:
        return f"{p.name}: no spare replicas (hardware.redundancy 0): losing a node loses capacity"
    cost = spares * p.usd_per_instance_hour * HOURS_PER_MONTH
    what = (f"{plural(p.redundancy_replicas, 'spare replica')} = {plural(spares, 'spare node')} "
            f"({p.instance_type}, {money(cost)}/month)")
    if p.replicas_per_instance > 1:
        why = (f"one node holds {p.replicas_per_instance} replicas, so a node, not a replica, is what fails: "
               "the spare is a whole node")
    elif p.pipeline_parallel > 1:
        why = f"one replica spans {p.pipeline_parallel} nodes, so a spare replica is {p.pipeline_parallel} nodes"
    else:
        why = "one replica per node"
    return f"{p.name}: {what}; {why}"


def cold_start_line(plan: Plan, p: Pool) -> str:
    """The cold start term by term and what it means for autoscaling: the planned spare capacity must
    absorb demand growth for that long, since a scale-up serves only after it."""
    cs = cold_start(p)
    if plan.fleet is not None:  # replicas from a replay: its bursts, not one mean load, set the headroom
        return (f"{p.name}: {cs.summary()}; autoscaling lead time: a scale-up serves after that, so the replayed "
                "fleet (sized for the traffic's own bursts) must absorb growth until then")
    share = max(p.demand_share, 1e-9) * plan.totals.demand_output_tokens_per_s
    capacity = p.replicas_for_demand * p.per_replica.goodput_output_tokens_per_s
    spare = capacity / share - 1 if share > 0 else 0.0
    return (f"{p.name}: {cs.summary()}; autoscaling lead time: a scale-up serves after that, so the demand "
            f"replicas' {spare:.0%} capacity headroom must absorb growth until then")


def bound_label(r: PerReplica) -> str:
    """What binds, short: the target that breaks first as the binds line names it ("ITL p99 tail"), else the
    constraint's label (sizing.perf.binding.LABELS)."""
    if r.bound in ("itl-tail", "ttft-queueing") and r.binds:
        return r.binds.split(":", 1)[0].split(" (", 1)[0]
    return LABELS.get(r.bound, r.bound)


def pool_rows(plan: Plan) -> list[list[str]]:
    rows = []
    for p in plan.pools:
        r = p.per_replica
        rows.append([
            p.name, p.instance_type, f"{p.gpu} ×{p.gpus_per_instance}", _parallel(p),
            precision_label(p.precision, p.gpu), p.purchase, f"{p.replicas} ({p.redundancy_replicas} spare)",
            f"{p.instances_min}/{p.instances_desired}/{p.instances_max}",
            f"{r.goodput_output_tokens_per_s:,.0f}" + (
                f" ({r.goodput_output_tokens_per_s_p10:,.0f}–{r.goodput_output_tokens_per_s_p90:,.0f})"
                if r.goodput_output_tokens_per_s_p10 > 0 else ""),
            *(_pool_cell(plan, p, m, q) for m, q, _ in _targets(plan)),
            bound_label(r), money(p.usd_per_hour, 2),
        ])
    return rows


def pool_headers(plan: Plan) -> list[str]:
    """The pool table's columns: one predicted/target column per SLO target."""
    return (["pool", "instance", "GPUs/inst", "parallel", "precision", "purchase", "replicas", "inst min/des/max",
             "goodput tok/s/replica (p10–p90)"]
            + [f"{SLO_LABELS[m]} {q} ms (pred/SLO)" for m, q, _ in _targets(plan)] + ["binds", "$/h"])


def pool_fields(plan: Plan, p: Pool) -> list[tuple[str, str]]:
    """One pool as key: value pairs (the vertical layout)."""
    r = p.per_replica
    return [
        ("instances", f"{p.instances_desired} × {p.instance_type} ({plural(p.gpus_per_instance, p.gpu + ' GPU')} "
                      f"each), {p.purchase}; autoscaling {p.instances_min}–{p.instances_max}"),
        ("replicas", f"{plural(p.replicas, 'replica')} of {_parallel(p)} {precision_label(p.precision, p.gpu)} "
                     f"({p.redundancy_replicas} spare)"),
        ("goodput", f"{num(r.goodput_output_tokens_per_s)} output tokens/s per replica at the SLO" + (
            f" (p10–p90 {num(r.goodput_output_tokens_per_s_p10)}–{num(r.goodput_output_tokens_per_s_p90)}, "
            "from the model's held-out error)" if r.goodput_output_tokens_per_s_p10 > 0 else "")),
        *((f"{SLO_LABELS[m]} {q}", f"{num(r.percentile(m, q))} ms (SLO {num(v)} ms)")
          for m, q, v in _pool_targets(plan, p)),
        ("binds", r.binds or bound_label(r)),
        *([("batching", f"max_num_batched_tokens {p.vllm.max_num_batched_tokens:,}, max_num_seqs "
                        f"{p.vllm.max_num_seqs:,}: {r.batching.split(': ', 1)[-1]}")] if r.batching else []),
        *([("percentiles", f"TTFT p50/p95/p99 {num(r.ttft_p50_ms)}/{num(r.ttft_p95_ms)}/{num(r.ttft_p99_ms)} ms, "
                           f"ITL {num(r.itl_p50_ms)}/{num(r.itl_p95_ms)}/{num(r.itl_p99_ms)} ms at the planned load")]
          if r.ttft_p50_ms > 0 else []),
        ("spares", redundancy_line(p).split(": ", 1)[1]),
        ("cold start", cold_start_line(plan, p).split(": ", 1)[1]),
        ("cost", f"{money(p.usd_per_hour, 2)}/h, {money(p.usd_per_hour * HOURS_PER_MONTH)}/month"),
    ]


def _platform_cell(plan: Plan) -> str:
    gpu_names = {f"GPU instances ({p.purchase}, {p.instance_type})" for p in plan.pools}
    unpriced = [c for c in plan.cost_lines if c.usd_per_month is None and c.name not in gpu_names]
    if not unpriced:
        return money(plan.totals.platform_usd_per_month)
    if plan.totals.platform_usd_per_month == 0:
        return f"not priced in {plan.region}"
    return f"{money(plan.totals.platform_usd_per_month)} + {len(unpriced)} unpriced items"


def totals_rows(plan: Plan) -> list[tuple[str, str]]:
    t = plan.totals
    held_out = bool(t.gpus_range and t.usd_per_month_range)
    return [
        ("GPUs / instances", f"{t.gpus:,} / {t.instances:,}"
         + (f" (p10–p90 {t.gpus_range[0]:,}–{t.gpus_range[1]:,} GPUs, from the model's held-out goodput error)"
            if held_out else "")),
        ("GPU $/hour", money(t.usd_per_hour, 2)),
        ("GPU $/month (730 h)", f"{money(t.usd_per_month)} ("
         + (f"p10–p90 {money(t.usd_per_month_range[0])} – {money(t.usd_per_month_range[1])} from the held-out "
            "goodput error; " if held_out else "")
         + f"autoscaling {money(t.usd_per_month_min)} – {money(t.usd_per_month_max)})"),
        ("platform $/month", _platform_cell(plan)),
        ("all-in $/month", money(t.all_in_usd_per_month)),
        ("$/1M output tokens (GPU, planned load)", usd(t.usd_per_million_output_tokens, cents=True)),
        ("$/1M output tokens (GPU, at capacity)", usd(t.usd_per_million_output_tokens_at_capacity, cents=True)),
        ("$/1M output tokens (all-in, planned)", usd(t.all_in_usd_per_million_output_tokens, cents=True)),
        ("demand / capacity (output tok/s)", f"{t.demand_output_tokens_per_s:,.0f} / "
                                             f"{t.capacity_output_tokens_per_s:,.0f} "
                                             f"({t.utilization:.0%} utilised)"),
    ]


def api_input_price(a: Any) -> str:
    """The input price of an API row, with its cache-read price when the workload's reused prefix is billed at
    it, e.g. "$0.15 (cached $0.075)"."""
    base = usd(a.usd_per_million_input_tokens, cents=True)
    if a.cached_input_share > 0 and a.usd_per_million_cached_input_tokens is not None:
        return f"{base} (cached {usd(a.usd_per_million_cached_input_tokens, cents=True)})"
    return base


def api_cache_line(plan: Plan) -> str | None:
    """One line on how the hosted-API bills price the workload's reused prefix, None when nothing is reused."""
    rows = [a for a in plan.api_comparison if a.prefix_share > 0]
    if not rows:
        return None
    cached = [f"{a.provider} cached input at ${a.usd_per_million_cached_input_tokens:g}/1M" for a in rows
              if a.usd_per_million_cached_input_tokens is not None]
    full = [a.provider for a in rows if a.usd_per_million_cached_input_tokens is None]
    return (f"hosted APIs: {rows[0].prefix_share:.0%} of input tokens repeat a cached prefix (as the self-hosted "
            f"plan assumes): " + "; ".join(cached + ([f"no cache-read price at {', '.join(full)}: all input at the "
                                                      "input price"] if full else [])))


def api_rows(plan: Plan) -> list[list[str]]:
    return [[a.provider, a.model + ("" if a.exact_model else " (nearest)"),
             api_input_price(a), usd(a.usd_per_million_output_tokens, cents=True),
             money(a.usd_per_month_same_traffic), f"{a.ratio_to_self_hosted:.2f}×"] for a in plan.api_comparison]


API_HEADERS = ["provider", "model", "$/1M in", "$/1M out", "$/month same traffic", "API ÷ self-hosted"]


def purchase_rows(plan: Plan) -> list[list[str]]:
    """The planned fleet under each purchase option: GPU $/month, $/1M output tokens, the rates'
    date and source ("not in the bundled data ..." where the catalog has no rate)."""
    return [[o.option, money(o.usd_per_month) if o.usd_per_month is not None else "-",
             usd(o.usd_per_million_output_tokens, cents=True) if o.usd_per_million_output_tokens is not None else "-",
             o.as_of or "-", "; ".join(x for x in (o.source, o.note) if x)] for o in plan.purchase_options]


PURCHASE_HEADERS = ["purchase option", "GPU $/month", "$/1M out", "as of", "source"]
PURCHASE_TITLE = "The same GPU fleet under each purchase option"


def _skipped(plan: Plan) -> list[str]:
    return sorted({a.gpu for a in plan.alternatives if not a.feasible and a.why_not_chosen.startswith("no-gpu-specs")})


def alt_rows(plan: Plan) -> list[list[str]]:
    skipped = set(_skipped(plan))
    return [[a.strategy, a.gpu, a.instance_type, precision_label(a.precision, a.gpu),
             f"TP{a.tensor_parallel}" if a.tensor_parallel else "-",
             str(a.gpus) if a.feasible else "-", money(a.usd_per_month) if a.feasible else "infeasible",
             a.why_not_chosen] for a in plan.alternatives if not (not a.feasible and a.gpu in skipped)]


ALT_HEADERS = ["strategy", "GPU", "instance", "precision", "TP", "GPUs", "$/month", "why not chosen"]
ALT_NARROW = [1, 3, 4, 5, 6, 7]


def engine_rows(plan: Plan) -> list[list[str]]:
    """The best plan of each allowed engine (llmcap:workload.engine as a list), chosen one first."""
    rows = sorted(plan.engines, key=lambda e: not e.chosen)
    return [[e.engine + (" (chosen)" if e.chosen else ""), e.gpu or "-", e.instance_type or "-",
             precision_label(e.precision, e.gpu) if e.feasible else "-",
             f"TP{e.tensor_parallel}" if e.feasible else "-", str(e.gpus) if e.feasible else "-",
             f"{num(e.goodput_output_tokens_per_s_per_replica)}" if e.feasible else "-",
             money(e.usd_per_month) if e.usd_per_month is not None else "infeasible",
             money(e.all_in_usd_per_month) if e.all_in_usd_per_month is not None else "-",
             usd(e.usd_per_million_output_tokens, cents=True) if e.usd_per_million_output_tokens is not None else "-",
             e.why] for e in rows]


ENGINE_HEADERS = ["engine", "GPU", "instance", "precision", "TP", "GPUs", "goodput tok/s/replica", "GPU $/month",
                  "all-in $/month", "$/1M out", "why"]
ENGINE_NARROW = [0, 1, 5, 6, 8, 10]  # engine, GPU, GPUs, goodput, all-in, why


def skipped_line(plan: Plan) -> str | None:
    s = _skipped(plan)
    return f"skipped (no datasheet row in gpus.csv): {', '.join(s)}" if s else None


def price_lines(plan: Plan) -> list[str]:
    """The assumptions that say where the prices come from and how old they are, and how a price tie was
    decided (sizing.planning.planner.tie_note)."""
    return [a for a in plan.assumptions if a.startswith(("instance prices", "hosted-API prices", "tie: "))]


def render_table(plan: Plan, console: Any) -> None:
    from rich.table import Table

    wide = (console.width or 80) >= WIDE_COLUMNS
    console.print(f"[bold]{headline(plan)}[/bold]")
    if wide:
        t = Table(title=f"Plan for stack {plan.stack} (strategy {plan.strategy})")
        for h in pool_headers(plan):
            t.add_column(h)
        for r in pool_rows(plan):
            t.add_row(*r)
        console.print(t)
        for p in plan.pools:
            console.print(f"binds: {p.name}: {p.per_replica.binds}" if p.per_replica.binds else "")
            console.print(f"spares: {redundancy_line(p)}")
            console.print(f"cold start: {cold_start_line(plan, p)}")
    else:
        console.print(f"Plan for stack {plan.stack} (strategy {plan.strategy})")
        for p in plan.pools:
            g = Table.grid(padding=(0, 2))
            g.add_column(no_wrap=True, style="bold")
            g.add_column(overflow="fold")
            for k, v in pool_fields(plan, p):
                g.add_row(k, v)
            console.print(f"[bold]pool {p.name}[/bold]")
            console.print(g)
    for line in trace_lines(plan):
        console.print(line, overflow="fold")
    if plan.classes and wide:
        ct = Table(title="Classes: predicted percentiles against targets")
        for h in CLASS_HEADERS:
            ct.add_column(h, overflow="fold")
        for r in class_rows(plan):
            ct.add_row(*r)
        console.print(ct)
    elif plan.classes:
        console.print("Classes: predicted percentiles against targets")
        for line in class_lines(plan):
            console.print(f"  {line}", overflow="fold")
    for line in fleet_lines(plan):
        console.print(line, overflow="fold")
    tt = Table(title="Cost")
    tt.add_column("figure")
    tt.add_column("value", justify="right")
    for k, v in totals_rows(plan):
        tt.add_row(k, v)
    console.print(tt)
    tables = [("Best of each engine", ENGINE_HEADERS, engine_rows(plan), ENGINE_NARROW),
              ("Best of each strategy and GPU", ALT_HEADERS, alt_rows(plan), ALT_NARROW)]
    if wide:
        tables.insert(1, ("Hosted APIs for the same traffic", API_HEADERS, api_rows(plan), []))
        tables.insert(1, (PURCHASE_TITLE, PURCHASE_HEADERS, purchase_rows(plan), []))
    elif plan.purchase_options:
        console.print(PURCHASE_TITLE)
        for o, r in zip(plan.purchase_options, purchase_rows(plan), strict=True):
            console.print(f"  {r[0]}: {r[1]}/month, {r[2]} per 1M out, as of {r[3]} ({r[4]})"
                          if o.usd_per_month is not None else f"  {r[0]}: {r[4]}", overflow="fold")
    if not wide and plan.api_comparison:
        console.print("Hosted APIs for the same traffic")
        for a in plan.api_comparison:
            console.print(f"  {a.provider} {a.model}{'' if a.exact_model else ' (nearest)'}: "
                          f"{api_input_price(a)} / "
                          f"{usd(a.usd_per_million_output_tokens, cents=True)} per 1M in / out, "
                          f"{money(a.usd_per_month_same_traffic)}/month ({a.ratio_to_self_hosted:.2f}× self-hosted)")
    for title, headers, rows, narrow in tables:
        if rows:
            cols = list(range(len(headers))) if wide else narrow
            at = Table(title=title)
            for i in cols:
                at.add_column(headers[i], overflow="fold")
            for r in rows:
                at.add_row(*[r[i] for i in cols])
            console.print(at)
    if api_cache_line(plan):
        console.print(api_cache_line(plan), overflow="fold")
    if skipped_line(plan):
        console.print(skipped_line(plan))
    for line in price_lines(plan):
        console.print(line, overflow="fold")
    for w in plan.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")


def render_markdown(plan: Plan) -> str:
    parts = [f"### llmcap plan: `{plan.stack}`", "", headline(plan), "",
             md_table(pool_headers(plan), pool_rows(plan)), ""]
    parts += [f"- binds: {p.name}: {p.per_replica.binds}" for p in plan.pools if p.per_replica.binds]
    parts += [f"- spares: {redundancy_line(p)}" for p in plan.pools]
    parts += [f"- cold start: {cold_start_line(plan, p)}" for p in plan.pools]
    parts += [f"- {line}" for line in trace_lines(plan)]
    if plan.classes:
        parts += ["", "**Classes: predicted percentiles against targets**", "",
                  md_table(CLASS_HEADERS, class_rows(plan))]
    parts += [f"- {line}" for line in fleet_lines(plan)]
    parts += ["", md_table(["figure", "value"], [list(r) for r in totals_rows(plan)])]
    if plan.purchase_options:
        parts += ["", f"**{PURCHASE_TITLE}**", "", md_table(PURCHASE_HEADERS, purchase_rows(plan))]
    if plan.api_comparison:
        parts += ["", "**Hosted APIs for the same traffic**", "", md_table(API_HEADERS, api_rows(plan))]
        if api_cache_line(plan):
            parts += ["", str(api_cache_line(plan))]
    if plan.engines:
        parts += ["", "**Best of each engine**", "", md_table(ENGINE_HEADERS, engine_rows(plan))]
    if plan.alternatives:
        parts += ["", "**Best of each strategy and GPU**", "", md_table(ALT_HEADERS, alt_rows(plan))]
    if skipped_line(plan):
        parts += ["", str(skipped_line(plan))]
    parts += [""] + [f"- {line}" for line in price_lines(plan)]
    if plan.warnings:
        parts += [""] + [f"- ⚠ {w}" for w in plan.warnings]
    return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class PlanText:
    """The plan's views as text, for documents that lay them out themselves (sizing.report.design_doc):
    built here once so a document never re-formats a plan figure."""

    headline: str
    pool_headers: list[str]
    pool_rows: list[list[str]]
    totals_rows: list[tuple[str, str]]
    api_headers: list[str]
    api_rows: list[list[str]]
    redundancy_lines: list[str]
    cold_start_lines: list[str]
    purchase_headers: list[str] = field(default_factory=list)
    purchase_rows: list[list[str]] = field(default_factory=list)  # the plan's fleet under each purchase option
    class_headers: list[str] = field(default_factory=list)
    class_rows: list[list[str]] = field(default_factory=list)  # per request class: targets and percentiles
    traffic_lines: list[str] = field(default_factory=list)  # what a trace says, and the replayed fleet
    engine_headers: list[str] = field(default_factory=list)
    engine_rows: list[list[str]] = field(default_factory=list)  # the best plan of each engine allowed


def plan_text(plan: Plan) -> PlanText:
    return PlanText(headline=headline(plan), pool_headers=pool_headers(plan), pool_rows=pool_rows(plan),
                    totals_rows=totals_rows(plan), api_headers=API_HEADERS, api_rows=api_rows(plan),
                    redundancy_lines=[redundancy_line(p) for p in plan.pools],
                    cold_start_lines=[cold_start_line(plan, p) for p in plan.pools],
                    purchase_headers=PURCHASE_HEADERS, purchase_rows=purchase_rows(plan),
                    class_headers=CLASS_HEADERS, class_rows=class_rows(plan),
                    traffic_lines=[*trace_lines(plan), *fleet_lines(plan)],
                    engine_headers=ENGINE_HEADERS, engine_rows=engine_rows(plan))
