"""A CostDiff as a PR comment (markdown), JSON and a rich table. Pure functions of the model."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sizing.report.format import md_table, money

if TYPE_CHECKING:
    from sizing.analysis.diff import CostDiff, Side, StackDiff
    from sizing.plan import CostLine

GITHUB_COMMENT_LIMIT = 65_536
MARKER = "<!-- llmcap-cost-diff -->"
NOT_PLANNED = "no plan"


def signed_money(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "not priced"
    if round(x, digits) == 0:
        return f"${0:.{digits}f}"
    return f"{'+' if x > 0 else '-'}${abs(x):,.{digits}f}"


def signed_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f}%"


def headline(d: CostDiff) -> str:
    """One sentence: how the monthly bill moves."""
    delta, pct = d.total_delta_usd_per_month, d.total_delta_percent
    if not d.stacks:
        text = "No stack files changed: no cost change."
    elif len(d.stacks_not_priced) == len(d.stacks):
        return (f"Cost change not priced: {', '.join(d.stacks_not_priced)} could not be planned on one side "
                "(see the reasons below).")
    elif abs(delta) < 0.005:
        text = "No cost change in the stacks that could be priced." if d.stacks_not_priced else "No cost change."
    else:
        verb = "rise" if delta > 0 else "fall"
        how = f" ({signed_pct(pct)})" if pct is not None else ""
        text = (f"Monthly cost will {verb} by ${abs(delta):,.0f}{how}, from ${d.total_before_usd_per_month:,.0f} "
                f"to ${d.total_after_usd_per_month:,.0f} per month.")
    if d.stacks_not_priced:
        text += (f" Not priced (no plan on one side): {', '.join(d.stacks_not_priced)}; "
                 "their change is not counted.")
    return text


def _arrow(a: Any, b: Any) -> str:
    return str(a) if a == b else f"{a} → {b}"


def _get(s: Side | None, attr: str, fmt: Any = str) -> str:
    if s is None:
        return "–"
    if not s.planned:
        return NOT_PLANNED
    v = getattr(s, attr)
    if v is None:
        return "not priced" if "usd" in attr else "–"
    return str(fmt(v))


def _pair(sd: StackDiff, attr: str, fmt: Any = str) -> str:
    return _arrow(_get(sd.before, attr, fmt), _get(sd.after, attr, fmt))


def _m0(x: float) -> str:
    return money(x)


def _m2(x: float) -> str:
    return money(x, 2)


def _m3(x: float) -> str:
    return money(x, 3)


def _types(v: list[str]) -> str:
    return ", ".join(v) or "–"


SUMMARY_HEADERS = ["stack", "status", "GPUs", "instance types", "$/hour (GPU)", "$/month (all-in)", "Δ $/month",
                   "Δ %", "$/1M output tokens"]


def summary_row(sd: StackDiff) -> list[str]:
    return [f"`{sd.stack}`", sd.status, _pair(sd, "gpus"), _pair(sd, "instance_types", _types),
            _pair(sd, "usd_per_hour", _m2), _pair(sd, "usd_per_month", _m0), signed_money(sd.delta_usd_per_month),
            signed_pct(sd.delta_percent), _pair(sd, "usd_per_million_output_tokens", _m3)]


def _range(s: Side) -> str:
    return f"{money(s.usd_per_month_min)} / {money(s.usd_per_month)} / {money(s.usd_per_month_max)}"


def _api(s: Side) -> str:
    a = s.cheapest_api
    return "–" if a is None else (f"{a.provider} {a.model}: {money(a.usd_per_month_same_traffic)}/month "
                                  f"({a.ratio_to_self_hosted:.2f}× self-hosted"
                                  + (f"; {a.cached}" if a.cached else "") + ")")


def detail_rows(sd: StackDiff) -> list[list[str]]:
    def row(label: str, attr: str, fmt: Any = str, delta_digits: int | None = None) -> list[str]:
        b, a = _get(sd.before, attr, fmt), _get(sd.after, attr, fmt)
        d = ""
        if delta_digits is not None and sd.before and sd.after and sd.before.planned and sd.after.planned:
            bv, av = getattr(sd.before, attr), getattr(sd.after, attr)
            d = signed_money(None if bv is None or av is None else av - bv, delta_digits)
        return [label, b, a, d]

    def side_fn(fn: Any) -> list[str]:
        return [_side_or(sd.before, fn), _side_or(sd.after, fn)]

    return [
        row("model", "model"), row("region", "region"),
        ["deployment", *side_fn(lambda s: "<br>".join(s.pools) or "–"), ""],
        row("GPUs", "gpus"), row("GPU types", "gpu_types", _types), row("instances", "instances"),
        row("GPU $/hour", "usd_per_hour", _m2, 2),
        row("GPU $/month (730 h)", "gpu_usd_per_month", _m0, 0),
        row("platform $/month", "platform_usd_per_month", _m0, 0),
        row("all-in $/month", "usd_per_month", _m0, 0),
        ["range $/month (min / expected / max)", *side_fn(_range), ""],
        row("$/1M output tokens (all-in)", "usd_per_million_output_tokens", _m3, 3),
        row("demand (output tokens/s)", "demand_output_tokens_per_s", lambda v: f"{v:,.0f}"),
        row("concurrent users", "concurrent_users", lambda v: f"{v:,.0f}"),
        row("SLO", "slo", str),
        ["cheapest hosted API, same traffic", *side_fn(_api), ""],
    ]


def _side_or(s: Side | None, fn: Any) -> str:
    if s is None:
        return "–"
    return fn(s) if s.planned else NOT_PLANNED


def _line_money(x: float | None) -> str:
    return money(x, 2 if x is not None and abs(x) < 100 else 0)


def line_rows(before: list[CostLine], after: list[CostLine], unplanned: str | None = None) -> list[list[str]]:
    """Cost lines matched by name: before → after and Δ; a line without a price says so. `unplanned`: the
    side ("before" or "after") that exists but has no plan: its column says so and no Δ is computed (a
    stack that cannot be planned is not free: its cost change is not priced, never −the other side)."""
    if unplanned is not None:
        lines = before if unplanned == "after" else after
        rows = line_rows(lines, lines)
        for r in rows:
            r[1] = r[1].split(" → ")[-1]
            r[3 if unplanned == "after" else 2] = NOT_PLANNED
            r[4] = "not priced"
        return rows
    def agg(lines: list[CostLine]) -> dict[str, tuple[float, float | None]]:
        out: dict[str, tuple[float, float | None]] = {}
        for ln in lines:
            q, u = out.get(ln.name, (0.0, 0.0))
            out[ln.name] = (q + ln.quantity, None if u is None or ln.usd_per_month is None else u + ln.usd_per_month)
        return out

    b, a = agg(before), agg(after)
    rows = []
    for name in list(dict.fromkeys([*b, *a])):
        bq, bu = b.get(name, (0.0, 0.0))
        aq, au = a.get(name, (0.0, 0.0))
        d = None if bu is None or au is None else au - bu
        rows.append([name, f"{bq:g} → {aq:g}" if bq != aq else f"{aq:g}",
                     _line_money(bu) if name in b else "–", _line_money(au) if name in a else "–",
                     signed_money(d, 2 if d is not None and abs(d) < 100 else 0)])
    return rows


def resource_rows(lines: list[CostLine]) -> list[list[str]]:
    return [[ln.name, f"{ln.quantity:g} {ln.unit}", _line_money(ln.usd_per_month), ln.source] for ln in lines]


def _delta_text(delta: float | None) -> str:
    return "cost change not priced" if delta is None else f"{signed_money(delta)}/month"


def plan_source_text(s: Side | None) -> str:
    """Which plan a side is: the ref's saved plan file, or planned here."""
    if s is None or s.plan_source is None:
        return "–"
    if s.plan_source == "saved":
        return f"saved `{s.plan_file}`"
    return "re-planned here (no saved plan at this ref)"


def render_details(sd: StackDiff) -> str:
    path = f" (`{sd.path}`)" if sd.path else ""
    if sd.renamed_from:
        path = f" (`{sd.renamed_from}` → `{sd.path}`)"
    parts = [f"<details><summary><b>{sd.stack}</b>{path}: {sd.status}, "
             f"{_delta_text(sd.delta_usd_per_month)}</summary>", "",
             md_table(["", "before", "after", "Δ"], detail_rows(sd)
                       + ([["plan", plan_source_text(sd.before), plan_source_text(sd.after), ""]]
                          if any(x is not None and x.plan_source for x in (sd.before, sd.after)) else []))]
    unplanned = next((k for k, x in (("before", sd.before), ("after", sd.after)) if x is not None and not x.planned),
                     None)
    lines = line_rows(sd.before.cost_lines if sd.before else [], sd.after.cost_lines if sd.after else [], unplanned)
    if lines:
        parts += ["", "**Cost lines ($/month)**", "", md_table(["line", "quantity", "before", "after", "Δ"], lines)]
    if sd.after and sd.after.resources:
        priced = sum(ln.usd_per_month or 0 for ln in sd.after.resources)
        unpriced = sum(1 for ln in sd.after.resources if ln.usd_per_month is None)
        parts += ["", f"**Resources in the Pulumi program ($/month)**: {money(priced)} priced"
                      + (f", {unpriced} not priced" if unpriced else ""), "",
                  md_table(["resource", "quantity", "$/month", "source"], resource_rows(sd.after.resources))]
    if sd.notes:
        parts += [""] + [f"- ⚠ {n}" for n in sd.notes]
    if sd.after and sd.after.capacity_ends:
        parts += [""] + [f"- ⏳ {line}" for line in sd.after.capacity_ends]
    parts += ["", "</details>"]
    return "\n".join(parts)


def _footer(d: CostDiff) -> str:
    same = f"{d.unchanged_files} stack file(s) unchanged. " if d.unchanged_files else ""
    sources = {x.plan_source for sd in d.stacks for x in (sd.before, sd.after) if x is not None}
    if d.source != "git":
        how = "re-rendered from saved plans"
    elif sources == {"saved"}:
        how = "each side is the saved plan at its ref (what pulumi up deploys)"
    elif "saved" in sources:
        how = "saved plans at each ref where present, else planned with the bundled calibration (see each stack)"
    else:
        how = "planned with the bundled calibration"
    return (f"<sub>{same}Base `{d.base}` → head `{d.head}`. All-in = GPU instances + platform (EKS, system nodes, "
            "NAT, storage) at 730 h/month; range = node-group minimums .. autoscaling maximums. Prices are catalog "
            f"lookups; {how}. Generated by `llmcap diff`.</sub>")


def render_markdown(d: CostDiff, limit: int = GITHUB_COMMENT_LIMIT, gate: list[str] | None = None) -> str:
    """The PR comment. Fits `limit` characters: stack details, then summary rows, are left out
    (and the comment says so) when it would not. `gate`: why the gates failed, shown under the headline."""
    head = [MARKER, "## llmcap cost diff", "", f"**{headline(d)}**", ""]
    if gate:
        head += [f"- ❌ **Gate failed:** {g}" for g in gate] + [""]
    foot = ["", _footer(d), ""]
    rows = [summary_row(s) for s in d.stacks]
    details = [render_details(s) for s in d.stacks]

    def assemble(n_rows: int, n_details: int) -> str:
        body: list[str] = []
        if rows:
            body += [md_table(SUMMARY_HEADERS, rows[:n_rows]), ""]
        left = (len(rows) - n_rows, len(details) - n_details)
        if left[0] or left[1]:
            body += [f"> ⚠ Truncated to fit GitHub's {GITHUB_COMMENT_LIMIT:,}-character comment limit: "
                     f"{left[0]} summary row(s) and {left[1]} stack detail(s) left out. "
                     "Run `llmcap diff` locally or see the JSON for everything.", ""]
        body += [x + "\n" for x in details[:n_details]]
        return "\n".join(head + body + foot)

    n_rows, n_details = len(rows), len(details)
    text = assemble(n_rows, n_details)
    while len(text) > limit and n_details > 0:
        n_details -= 1
        text = assemble(n_rows, n_details)
    while len(text) > limit and n_rows > 0:
        n_rows -= 1
        text = assemble(n_rows, n_details)
    return text


def to_dict(d: CostDiff) -> dict[str, Any]:
    data = d.model_dump(mode="json")
    first = {k: data.pop(k) for k in ("stacks", "total_delta_usd_per_month")}
    return {**first, **data}


def render_json(d: CostDiff) -> str:
    return json.dumps(to_dict(d), indent=2, ensure_ascii=False)


def render_table(d: CostDiff, console: Any) -> None:
    from sizing.report.format import fitted_table

    console.print(f"[bold]{headline(d)}[/bold]")
    if not d.stacks:
        return
    console.print(fitted_table(f"Cost diff {d.base} → {d.head}", list(SUMMARY_HEADERS),
                               [[c.replace("`", "") for c in summary_row(sd)] for sd in d.stacks], console.width or 80,
                               right=tuple(h for h in SUMMARY_HEADERS if h.startswith(("Δ", "$")))))
    for sd in d.stacks:
        for n in sd.notes:
            console.print(f"[yellow]{sd.stack}:[/yellow] {n}")
