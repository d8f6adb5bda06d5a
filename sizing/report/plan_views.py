"""The Plan as a rich table (terminal) and as markdown (PR comments, docs)."""

from __future__ import annotations

from typing import Any

from sizing.plan import Plan


def money(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "not priced"
    return f"${x:,.{digits}f}"


def _slo(plan: Plan) -> tuple[float, float]:
    slo = plan.workload.get("slo", {})
    return float(slo.get("ttft_p95_ms", 0)), float(slo.get("itl_p95_ms", 0))


def headline(plan: Plan) -> str:
    t = plan.totals
    pools = " + ".join(f"{p.instances_desired}× {p.instance_type} ({p.replicas} replicas of {p.tensor_parallel}"
                       f"{'×' + str(p.pipeline_parallel) if p.pipeline_parallel > 1 else ''} {p.gpu}, "
                       f"{p.precision}, {p.purchase})" for p in plan.pools)
    return (f"{plan.model} in {plan.region}: {pools} = {t.gpus} GPUs, {money(t.usd_per_hour, 2)}/h, "
            f"{money(t.usd_per_month)}/month, {money(t.usd_per_million_output_tokens, 3)} per 1M output tokens")


def pool_rows(plan: Plan) -> list[list[str]]:
    ttft, itl = _slo(plan)
    rows = []
    for p in plan.pools:
        r = p.per_replica
        rows.append([
            p.name, p.instance_type, f"{p.gpu} ×{p.gpus_per_instance}",
            f"TP{p.tensor_parallel}" + (f"×PP{p.pipeline_parallel}" if p.pipeline_parallel > 1 else ""),
            p.precision, p.purchase, f"{p.replicas} ({p.redundancy_replicas} spare)",
            f"{p.instances_min}/{p.instances_desired}/{p.instances_max}",
            f"{r.goodput_output_tokens_per_s:,.0f}" + (
                f" ({r.goodput_output_tokens_per_s_p10:,.0f}–{r.goodput_output_tokens_per_s_p90:,.0f})"
                if r.goodput_output_tokens_per_s_p10 > 0 else ""),
            f"{r.ttft_p95_ms:,.0f} / {ttft:,.0f}", f"{r.itl_p95_ms:.1f} / {itl:g}",
            money(p.usd_per_hour, 2),
        ])
    return rows


POOL_HEADERS = ["pool", "instance", "GPUs/inst", "parallel", "precision", "purchase", "replicas",
                "inst min/des/max", "goodput tok/s/replica (p10–p90)", "TTFT p95 ms (pred/SLO)",
                "ITL p95 ms (pred/SLO)", "$/h"]


def totals_rows(plan: Plan) -> list[tuple[str, str]]:
    t = plan.totals
    return [
        ("GPUs / instances", f"{t.gpus} / {t.instances}"),
        ("GPU $/hour", money(t.usd_per_hour, 2)),
        ("GPU $/month (730 h)", f"{money(t.usd_per_month)} (range {money(t.usd_per_month_min)} – "
                                f"{money(t.usd_per_month_max)})"),
        ("platform $/month", money(t.platform_usd_per_month)),
        ("all-in $/month", money(t.all_in_usd_per_month)),
        ("$/1M output tokens (GPU, planned load)", money(t.usd_per_million_output_tokens, 3)),
        ("$/1M output tokens (GPU, at capacity)", money(t.usd_per_million_output_tokens_at_capacity, 3)),
        ("$/1M output tokens (all-in, planned load)", money(t.all_in_usd_per_million_output_tokens, 3)),
        ("demand / capacity (output tok/s)", f"{t.demand_output_tokens_per_s:,.0f} / "
                                             f"{t.capacity_output_tokens_per_s:,.0f} "
                                             f"({t.utilization:.0%} utilised)"),
    ]


def api_rows(plan: Plan) -> list[list[str]]:
    return [[a.provider, a.model + ("" if a.exact_model else " (nearest)"), f"${a.usd_per_million_input_tokens:g}",
             f"${a.usd_per_million_output_tokens:g}", money(a.usd_per_month_same_traffic),
             f"{a.ratio_to_self_hosted:.2f}×"] for a in plan.api_comparison]


API_HEADERS = ["provider", "model", "$/1M in", "$/1M out", "$/month same traffic", "API ÷ self-hosted"]


def alt_rows(plan: Plan) -> list[list[str]]:
    return [[a.strategy, a.gpu, a.instance_type, a.precision, f"TP{a.tensor_parallel}" if a.tensor_parallel else "-",
             str(a.gpus) if a.feasible else "-", money(a.usd_per_month) if a.feasible else "infeasible",
             a.why_not_chosen] for a in plan.alternatives]


ALT_HEADERS = ["strategy", "GPU", "instance", "precision", "TP", "GPUs", "$/month", "why not chosen"]


def render_table(plan: Plan, console: Any) -> None:
    from rich.table import Table

    console.print(f"[bold]{headline(plan)}[/bold]")
    t = Table(title=f"Plan for stack {plan.stack} (strategy {plan.strategy})")
    for h in POOL_HEADERS:
        t.add_column(h)
    for r in pool_rows(plan):
        t.add_row(*r)
    console.print(t)
    tt = Table(title="Cost")
    tt.add_column("figure")
    tt.add_column("value", justify="right")
    for k, v in totals_rows(plan):
        tt.add_row(k, v)
    console.print(tt)
    for title, headers, rows in (("Hosted APIs for the same traffic", API_HEADERS, api_rows(plan)),
                                 ("Best of each strategy and GPU", ALT_HEADERS, alt_rows(plan))):
        if rows:
            at = Table(title=title)
            for h in headers:
                at.add_column(h)
            for r in rows:
                at.add_row(*r)
            console.print(at)
    for w in plan.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    out = ["| " + " | ".join(esc(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def render_markdown(plan: Plan) -> str:
    parts = [f"### llmcap plan: `{plan.stack}`", "", headline(plan), "",
             _md_table(POOL_HEADERS, pool_rows(plan)), "",
             _md_table(["figure", "value"], [list(r) for r in totals_rows(plan)])]
    if plan.api_comparison:
        parts += ["", "**Hosted APIs for the same traffic**", "", _md_table(API_HEADERS, api_rows(plan))]
    if plan.alternatives:
        parts += ["", "**Best of each strategy and GPU**", "", _md_table(ALT_HEADERS, alt_rows(plan))]
    if plan.warnings:
        parts += [""] + [f"- ⚠ {w}" for w in plan.warnings]
    return "\n".join(parts) + "\n"
