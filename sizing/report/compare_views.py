"""Renderers for `llmcap compare`: a side-by-side rich table and markdown, from the comparison model
(sizing.analysis.comparison.Comparison, the same document `--format json` writes). Pure functions of that
model; no planning here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sizing.analysis.comparison import OptionRow, OptionSummary

if TYPE_CHECKING:
    from sizing.analysis.comparison import Comparison, Sweep

ROWS: list[tuple[str, str]] = [
    ("deployment", "deployment"),
    ("gpus_instances", "GPUs / instances"),
    ("usd_per_hour", "GPU $/hour"),
    ("usd_per_month", "GPU $/month (730 h)"),
    ("usd_per_million_output_tokens", "$/1M output tokens (planned load)"),
    ("usd_per_million_output_tokens_at_capacity", "$/1M output tokens (at capacity)"),
    ("slo", "SLO targets: predicted (headroom)"),
    ("blast_radius", "capacity lost if one node fails"),
    ("survives_node_loss", "carries the demand after one node loss"),
    ("cold_start_s", "cold start (new node: boot, image, weights, engine)"),
]
MAX_SWEEP_ROWS = 15


def cell(row: OptionRow, key: str) -> str:
    """One option's cell of a ROWS line."""
    if not isinstance(row, OptionSummary):
        return "no plan meets the SLO" if key == "deployment" else "–"
    if key == "deployment":
        same = f"identical to {row.same_as}: " if row.same_as else ""
        return same + "; ".join(row.pools)
    if key == "gpus_instances":
        return f"{row.gpus} / {row.instances}"
    if key == "usd_per_hour":
        return f"${row.usd_per_hour:,.2f}"
    if key == "usd_per_month":
        return f"${row.usd_per_month:,.0f}"
    if key == "usd_per_million_output_tokens":
        return f"${row.usd_per_million_output_tokens:,.3f}"
    if key == "usd_per_million_output_tokens_at_capacity":
        return f"${row.usd_per_million_output_tokens_at_capacity:,.3f}"
    if key == "slo":
        return "; ".join(row.slo_figures)
    if key == "blast_radius":
        return f"{row.blast_radius:.0%}"
    if key == "survives_node_loss":
        return "yes" if row.survives_node_loss else "no"
    if key == "cold_start_s":
        return f"{row.cold_start_s / 60:.1f} min" if row.cold_start_s >= 90 else f"{row.cold_start_s:.0f} s"
    raise KeyError(f"compare view: no cell {key!r}")


def sweep_rows(sw: Sweep) -> tuple[list[str], list[list[str]]]:
    """A sample of the sweep (at most MAX_SWEEP_ROWS rows, always the first and last): x then $/month each."""
    names = list(sw.series)
    n = len(sw.values)
    step = max(1, -(-n // MAX_SWEEP_ROWS))
    idx = sorted(set(range(0, n, step)) | {n - 1})
    header = [sw.label] + [f"{k} $/month" for k in names]
    rows = []
    for i in idx:
        cells = [f"{sw.values[i]:g}"]
        for k in names:
            p = sw.series[k][i]
            cells.append("infeasible" if p.usd_per_month is None else f"${p.usd_per_month:,.0f}")
        rows.append(cells)
    return header, rows


def findings(sw: Sweep | None) -> list[str]:
    """The crossovers and feasibility edges of a sweep, one sentence each."""
    if not sw:
        return []
    lines = [f"crossover: {c.text} (last swept value with the old order: {c.last_x_before:g}; $/month at "
             f"the crossover: " + ", ".join(f"{k} ${v:,.0f}" for k, v in c.usd_per_month_at_x.items()) + ")"
             for c in sw.crossovers]
    lines += [f"feasibility: {e.text}" for e in sw.feasibility_edges]
    if not lines:
        lines.append(f"no crossover and no feasibility change between {sw.values[0]:g} and "
                     f"{sw.values[-1]:g} {sw.label}")
    api = sw.cheapest_api
    if api:
        lines.append(f"cheapest hosted API: {api.provider} {api.model} at "
                     f"${api.usd_per_million_output_tokens_with_input:g} per 1M output tokens with their input "
                     f"(${api.usd_per_million_output_tokens:g} output + {api.prompt_tokens_per_output_token:g} prompt "
                     f"tokens × ${api.usd_per_million_input_tokens:g} per 1M"
                     + (f", {api.cached_input_share:.0%} of them cached at ${api.usd_per_million_cached_input_tokens:g}"
                        f"/1M" if api.cached_input_share > 0 and api.usd_per_million_cached_input_tokens is not None
                        else "") + ")")
    return lines + [f"warning: {w}" for w in sw.warnings]


def _title(o: OptionRow, winner: str | None) -> str:
    return o.label + (" ★" if o.label == winner else "")


def render_table(cmp: Comparison, console: Any) -> None:
    from rich.table import Table

    opts = cmp.options
    t = Table(title="Comparison", show_lines=False)
    t.add_column("")
    for o in opts:
        t.add_column(_title(o, cmp.winner), overflow="fold")
    for key, name in ROWS:
        t.add_row(name, *[cell(o, key) for o in opts])
    console.print(t)
    console.print(f"verdict: {cmp.winner or 'none'} — {cmp.reason}", soft_wrap=True)
    for o in opts:
        if not isinstance(o, OptionSummary):
            for p in o.problems[1:]:
                console.print(f"  {o.label}: {p}", soft_wrap=True)
    if cmp.sweep:
        header, rows = sweep_rows(cmp.sweep)
        st = Table(title=f"Sweep over {cmp.sweep.label}")
        for h in header:
            st.add_column(h, justify="right")
        for r in rows:
            st.add_row(*r)
        console.print(st)
        for line in findings(cmp.sweep):
            console.print(line, soft_wrap=True)


def render_markdown(cmp: Comparison) -> str:
    opts = cmp.options
    out = ["## Comparison", "",
           "| | " + " | ".join(_title(o, cmp.winner) for o in opts) + " |",
           "|---|" + "---|" * len(opts)]
    for key, name in ROWS:
        out.append(f"| {name} | " + " | ".join(cell(o, key) for o in opts) + " |")
    out += ["", f"**Verdict:** {cmp.winner or 'none'} — {cmp.reason}"]
    if cmp.sweep:
        header, rows = sweep_rows(cmp.sweep)
        out += ["", f"### Sweep over {cmp.sweep.label}", "", "| " + " | ".join(header) + " |",
                "|" + "---:|" * len(header)]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        out += [""] + [f"- {line}" for line in findings(cmp.sweep)]
    return "\n".join(out) + "\n"
