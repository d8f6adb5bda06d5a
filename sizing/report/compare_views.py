"""Renderers for `llmcap compare`: a side-by-side rich table and markdown, from the comparison JSON
document (sizing.analysis.compare.comparison_json). Pure functions of that document; no planning here."""

from __future__ import annotations

from typing import Any

ROWS: list[tuple[str, str]] = [
    ("deployment", "deployment"),
    ("gpus_instances", "GPUs / instances"),
    ("usd_per_hour", "GPU $/hour"),
    ("usd_per_month", "GPU $/month (730 h)"),
    ("usd_per_million_output_tokens", "$/1M output tokens (planned load)"),
    ("usd_per_million_output_tokens_at_capacity", "$/1M output tokens (at capacity)"),
    ("ttft", "TTFT p95 ms (headroom)"),
    ("itl", "ITL p95 ms (headroom)"),
    ("blast_radius", "capacity lost if one node fails"),
    ("survives_node_loss", "carries the demand after one node loss"),
    ("cold_start_s", "cold start (new node: boot, image, weights, engine)"),
]
MAX_SWEEP_ROWS = 15


def cell(row: dict[str, Any], key: str) -> str:
    if not row["feasible"]:
        return "no plan meets the SLO" if key == "deployment" else "–"
    if key == "deployment":
        same = f"identical to {row['same_as']}: " if row.get("same_as") else ""
        return same + "; ".join(row["pools"])
    if key == "gpus_instances":
        return f"{row['gpus']} / {row['instances']}"
    if key == "usd_per_hour":
        return f"${row['usd_per_hour']:,.2f}"
    if key == "usd_per_month":
        return f"${row['usd_per_month']:,.0f}"
    if key.startswith("usd_per_million"):
        return f"${row[key]:,.3f}"
    if key == "ttft":
        return f"{row['ttft_p95_ms']:,.0f} ({row['ttft_headroom']:.0%})"
    if key == "itl":
        return f"{row['itl_p95_ms']:.1f} ({row['itl_headroom']:.0%})"
    if key == "blast_radius":
        return f"{row['blast_radius']:.0%}"
    if key == "survives_node_loss":
        return "yes" if row["survives_node_loss"] else "no"
    if key == "cold_start_s":
        return f"{row['cold_start_s'] / 60:.1f} min" if row["cold_start_s"] >= 90 else f"{row['cold_start_s']:.0f} s"
    return str(row.get(key, ""))


def sweep_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A sample of the sweep (at most MAX_SWEEP_ROWS rows, always the first and last): x then $/month each."""
    sw = doc["sweep"]
    names = list(sw["series"])
    n = len(sw["values"])
    step = max(1, -(-n // MAX_SWEEP_ROWS))
    idx = sorted(set(range(0, n, step)) | {n - 1})
    header = [sw["label"]] + [f"{k} $/month" for k in names]
    rows = []
    for i in idx:
        cells = [f"{sw['values'][i]:g}"]
        for k in names:
            p = sw["series"][k][i]
            cells.append("infeasible" if p["usd_per_month"] is None else f"${p['usd_per_month']:,.0f}")
        rows.append(cells)
    return header, rows


def findings(doc: dict[str, Any]) -> list[str]:
    """The crossovers and feasibility edges of a sweep, one sentence each."""
    sw = doc.get("sweep")
    if not sw:
        return []
    lines = [f"crossover: {c['text']} (last swept value with the old order: {c['last_x_before']:g}; $/month at "
             f"the crossover: " + ", ".join(f"{k} ${v:,.0f}" for k, v in c["usd_per_month_at_x"].items()) + ")"
             for c in sw["crossovers"]]
    lines += [f"feasibility: {e['text']}" for e in sw["feasibility_edges"]]
    if not lines:
        lines.append(f"no crossover and no feasibility change between {sw['values'][0]:g} and "
                     f"{sw['values'][-1]:g} {sw['label']}")
    api = sw.get("cheapest_api")
    if api:
        lines.append(f"cheapest hosted API: {api['provider']} {api['model']} at "
                     f"${api['usd_per_million_output_tokens']:g} per 1M output tokens")
    return lines + [f"warning: {w}" for w in sw.get("warnings", [])]


def render_table(doc: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    opts = doc["options"]
    t = Table(title="Comparison", show_lines=False)
    t.add_column("")
    for o in opts:
        t.add_column(o["label"] + (" ★" if o["label"] == doc["winner"] else ""), overflow="fold")
    for key, name in ROWS:
        t.add_row(name, *[cell(o, key) for o in opts])
    console.print(t)
    console.print(f"verdict: {doc['winner'] or 'none'} — {doc['reason']}", soft_wrap=True)
    for o in opts:
        if not o["feasible"]:
            for p in o["problems"][1:]:
                console.print(f"  {o['label']}: {p}", soft_wrap=True)
    if doc.get("sweep"):
        header, rows = sweep_rows(doc)
        st = Table(title=f"Sweep over {doc['sweep']['label']}")
        for h in header:
            st.add_column(h, justify="right")
        for r in rows:
            st.add_row(*r)
        console.print(st)
        for line in findings(doc):
            console.print(line, soft_wrap=True)


def render_markdown(doc: dict[str, Any]) -> str:
    opts = doc["options"]
    out = ["## Comparison", "",
           "| | " + " | ".join(o["label"] + (" ★" if o["label"] == doc["winner"] else "") for o in opts) + " |",
           "|---|" + "---|" * len(opts)]
    for key, name in ROWS:
        out.append(f"| {name} | " + " | ".join(cell(o, key) for o in opts) + " |")
    out += ["", f"**Verdict:** {doc['winner'] or 'none'} — {doc['reason']}"]
    if doc.get("sweep"):
        header, rows = sweep_rows(doc)
        out += ["", f"### Sweep over {doc['sweep']['label']}", "", "| " + " | ".join(header) + " |",
                "|" + "---:|" * len(header)]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        out += [""] + [f"- {line}" for line in findings(doc)]
    return "\n".join(out) + "\n"
