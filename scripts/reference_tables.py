"""The reference-scenario figures (L4 scale-out against A100 scale-up, Llama-3-8B-Instruct) as markdown,
printed from `llmcap`'s own JSON output, and the blocks of README.md and docs/reference-scenario.md
between `<!-- reference-table:begin -->` and `<!-- reference-table:end -->` rewritten from them.

    python scripts/reference_tables.py            # print both blocks
    python scripts/reference_tables.py --write    # rewrite the blocks in place (each file atomically)
    python scripts/reference_tables.py --check    # exit 1 when a committed block differs

Every figure comes from `llmcap compare ... --format json` (the tuned planner `llmcap plan` runs),
`llmcap compare ... --sweep users=1..2000:200 --format json` (the sweep's analytic points) and
`llmcap plan ... --format json` (what binds per replica); this file only formats them, and the one
derived number, "cheaper by N %", is 1 − cheaper $/month ÷ dearer $/month, as `llmcap compare`'s
verdict states it. Runs are hermetic: bundled catalog, no calibration overlay. Money is USD, GPU cost
only, 730 h a month; $/1M out is per million output tokens. tests/test_reference_tables.py fails
when the committed blocks are stale; `bash scripts/update_goldens.sh` rewrites them."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STACKS = ["stacks/Pulumi.scaleout-l4.yaml", "stacks/Pulumi.scaleup-a100.yaml"]
L4, A100 = "scaleout-l4", "scaleup-a100"
USERS = (100, 1000)
PRECISIONS: tuple[tuple[str, list[str]], ...] = (  # label, --set overrides (docs/reference-scenario.md names them)
    ("FP16 only", ["workload.precision=fp16"]),
    ("FP8 only", ["workload.precision=fp8"]),
    ("FP16/FP8/int4-AWQ", []),
)
SWEEP = "users=1..2000:200"
BEGIN, END = "<!-- reference-table:begin -->", "<!-- reference-table:end -->"
README = ROOT / "README.md"
REFERENCE = ROOT / "docs" / "reference-scenario.md"

Runner = Callable[[list[str]], dict[str, Any]]


def cli_runner() -> Runner:
    """Run `llmcap ARGS` in-process (the CLI's own code path) and parse its JSON stdout. Hermetic: the
    bundled catalog ($LLMCAP_CATALOG_DIR) and an overlay file that does not exist."""
    from typer.testing import CliRunner

    from sizing.catalog.paths import BUNDLED_DIR
    from sizing.cli import app

    no_overlay = Path(tempfile.mkdtemp(prefix="llmcap-ref-")) / "no-overlay.json"
    env = {"LLMCAP_CATALOG_DIR": str(BUNDLED_DIR), "LLMCAP_CALIBRATION_OVERLAY": str(no_overlay),
           "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "160"}

    def run(args: list[str]) -> dict[str, Any]:
        cwd = Path.cwd()
        os.chdir(ROOT)  # the stack paths are relative to the repository root
        try:
            r = CliRunner().invoke(app, args, env=env)
        finally:
            os.chdir(cwd)
        if r.exit_code not in (0, 3):
            raise SystemExit(f"llmcap {' '.join(args)}: exit {r.exit_code}\n{r.stdout}{r.stderr}")
        out: dict[str, Any] = json.loads(r.stdout)
        return out

    return run


def _sets(sets: list[str]) -> list[str]:
    return [a for s in sets for a in ("--set", s)]


def _users(n: int) -> list[str]:
    return [f"workload.traffic.concurrent_users={n}"]


def compare(run: Runner, users: int, sets: list[str]) -> dict[str, dict[str, Any]]:
    """`llmcap compare L4 A100 --set ... --format json`: each option by label."""
    doc = run(["compare", *STACKS, *_sets(_users(users) + sets), "--format", "json"])
    return {o["label"]: o for o in doc["options"]}


def _money(x: float) -> str:
    return f"${x:,.0f}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}".rstrip("0").rstrip(".") + " %"


def _deployment(o: dict[str, Any]) -> str:
    return "; ".join(o["pools"]) if o["feasible"] else "no plan"


def cheaper(opts: dict[str, dict[str, Any]], bold: bool = False) -> str:
    """Which option is cheaper by GPU $/month, and by how much (1 − cheaper ÷ dearer)."""
    a, b = opts[L4], opts[A100]
    if not a["feasible"] or not b["feasible"]:
        only = [n for n, o in ((L4, a), (A100, b)) if o["feasible"]]
        return f"{'L4' if only == [L4] else 'A100'} (the other has no plan)" if only else "neither has a plan"
    lo, hi = sorted((a, b), key=lambda o: o["usd_per_month"])
    name = "L4" if lo is a else "A100"
    text = f"{name}, by {100 * (1 - lo['usd_per_month'] / hi['usd_per_month']):.0f} %"
    return f"**{text}**" if bold else text


def _cell(o: dict[str, Any], key: str, fmt: Callable[[float], str]) -> str:
    return fmt(o[key]) if o["feasible"] else "—"


def gather(run: Runner) -> dict[str, Any]:
    """Every llmcap output the blocks quote: the six comparisons, the users sweep, the plans' binds."""
    comps = {(u, label): compare(run, u, sets) for u in USERS for label, sets in PRECISIONS}
    sweep = run(["compare", *STACKS, "--sweep", SWEEP, "--format", "json"])
    plans = {(u, s): run(["plan", f"stacks/Pulumi.{s}.yaml", *_sets(_users(u)), "--format", "json"])
             for u in USERS for s in (L4, A100)}
    return {"compare": comps, "sweep": sweep, "plans": plans}


def _label(label: str, o: dict[str, Any]) -> str:
    if label.startswith("FP16/"):
        picks = sorted({x["precision"] for x in o.values() if x["feasible"]})
        return f"{label} (picks {' / '.join(picks)})"
    return label


def full_table(data: dict[str, Any]) -> list[str]:
    """The six-row table of docs/reference-scenario.md."""
    rows = ["| users | precision | L4 scale-out | L4 $/month | L4 $/1M out | A100 scale-up | A100 $/month "
            "| A100 $/1M out | cheaper |", "|---|---|---|---|---|---|---|---|---|"]
    for u in USERS:
        for label, _ in PRECISIONS:
            o = data["compare"][(u, label)]
            a, b = o[L4], o[A100]
            rows.append(f"| {u:,} | {_label(label, o)} | {_deployment(a)} | {_cell(a, 'usd_per_month', _money)} "
                        f"| {_cell(a, 'usd_per_million_output_tokens', lambda x: f'${x:.3f}')} "
                        f"| {_deployment(b)} | {_cell(b, 'usd_per_month', _money)} "
                        f"| {_cell(b, 'usd_per_million_output_tokens', lambda x: f'${x:.3f}')} "
                        f"| {cheaper(o, bold=not label.endswith('only'))} |")
    return rows


def readme_table(data: dict[str, Any]) -> list[str]:
    """The README's two-row table: every precision allowed, then FP16 only and FP8 only."""
    rows = ["| concurrent users | L4 scale-out | A100 scale-up | cheaper | FP16 only: L4 vs A100 "
            "| FP8 only: L4 vs A100 |", "|---|---|---|---|---|---|"]
    for u in USERS:
        o = data["compare"][(u, PRECISIONS[-1][0])]
        single = []
        for label, _ in PRECISIONS[:-1]:
            s = data["compare"][(u, label)]
            single.append(f"{_cell(s[L4], 'usd_per_month', _money)} vs {_cell(s[A100], 'usd_per_month', _money)} "
                          f"({cheaper(s)})")

        def side(x: dict[str, Any]) -> str:
            if not x["feasible"]:
                return "no plan"
            return (f"{_deployment(x)}: {_money(x['usd_per_month'])}/month, "
                    f"${x['usd_per_million_output_tokens']:.2f} per 1M output tokens")

        rows.append(f"| {u:,} | {side(o[L4])} | {side(o[A100])} | {cheaper(o, bold=True)} | {single[0]} "
                    f"| {single[1]} |")
    return rows


def _bind_head(plan: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    pool = plan["pools"][0]
    binds = pool["per_replica"].get("binds") or "nothing reported"
    return binds.split(":", 1)[0], pool


def notes(data: dict[str, Any]) -> list[str]:
    """The notes under the tables: node-failure share, $/1M at capacity, what binds, the sweep's sentence."""
    every = PRECISIONS[-1][0]
    out = ["Notes (every precision allowed unless a row says otherwise):"]
    br, cap = [], []
    survive = True
    for u in USERS:
        o = data["compare"][(u, every)]
        a, b = o[L4], o[A100]
        if a["feasible"] and b["feasible"]:
            br.append(f"at {u:,} users {_pct(a['blast_radius'])} (L4) against {_pct(b['blast_radius'])} (A100)")
            cap.append(f"${a['usd_per_million_output_tokens_at_capacity']:.3f} (L4) against "
                       f"${b['usd_per_million_output_tokens_at_capacity']:.3f} (A100) at {u:,} users")
            survive = survive and bool(a["survives_node_loss"]) and bool(b["survives_node_loss"])
    out.append("- $/1M out is the GPU cost per 1M output tokens at the planned load.")
    out.append(f"- Capacity lost when one node fails: {'; '.join(br)}. "
               + ("Every option still carries the demand after losing a node."
                  if survive else "Not every option carries the demand after losing a node."))
    out.append(f"- Per 1M output tokens at capacity: {'; '.join(cap)}.")
    for u in USERS:
        parts = []
        for s, name in ((L4, "L4"), (A100, "A100")):
            head, pool = _bind_head(data["plans"][(u, s)])
            pr = pool["per_replica"]
            parts.append(f"{name} {pool['precision']} TP{pool['tensor_parallel']}, "
                         f"{pr['goodput_output_tokens_per_s']:,.0f} tok/s per replica with "
                         f"`--max-num-batched-tokens {pool['vllm']['max_num_batched_tokens']:,}`, bound by the "
                         f"{head}")
        out.append(f"- What binds at {u:,} users (`llmcap plan STACK --set "
                   f"workload.traffic.concurrent_users={u}`, `per_replica.binds`): {'; '.join(parts)}.")
    out.append(f"- {sweep_sentence(data)}")
    return out


def sweep_sentence(data: dict[str, Any]) -> str:
    """The users sweep's crossover sentence, and where its analytic points disagree with the planner."""
    sw = data["sweep"]["sweep"]
    series = sw["series"]
    xs = sw["values"]
    head = (f"The users sweep (`--sweep {SWEEP}`; its points are analytic, with vLLM's flags tuned on the "
            f"planner's grid but not simulated as `llmcap plan`'s finalists are) ")
    if sw["crossovers"]:
        text = head + "prints: " + "; ".join(c["text"] for c in sw["crossovers"]) + "."
    else:
        def cost(s: str, i: int) -> float | None:
            v = series[s][i].get("usd_per_month")
            return float(v) if v is not None else None
        ok = [i for i in range(len(xs)) if cost(L4, i) is not None and cost(A100, i) is not None]
        first = ok[0] if ok else None
        who = ("L4" if first is not None and (cost(L4, first) or 0) < (cost(A100, first) or 0) else "A100")
        text = head + (f"prints no crossover: {who} is cheaper at every user count from {xs[0]:,.0f} "
                       f"to {xs[-1]:,.0f}.")
    last = len(xs) - 1
    text += (f" At {xs[last]:,.0f} users it prices L4 at {_money(series[L4][last]['usd_per_month'])} "
             f"({series[L4][last]['deployment']}) against {_money(series[A100][last]['usd_per_month'])} "
             f"({series[A100][last]['deployment']}).")
    for u in USERS:
        i = min(range(len(xs)), key=lambda k: abs(xs[k] - u))
        o = data["compare"][(u, PRECISIONS[-1][0])]
        if not (o[L4]["feasible"] and o[A100]["feasible"]):
            continue
        sweep_l4 = series[L4][i]["usd_per_month"] < series[A100][i]["usd_per_month"]
        plan_l4 = o[L4]["usd_per_month"] < o[A100]["usd_per_month"]
        if sweep_l4 != plan_l4:
            text += (f" At {xs[i]:,.0f} users the sweep prices A100 at {_money(series[A100][i]['usd_per_month'])} "
                     f"({series[A100][i]['deployment']}), where the planner's tuned flags find "
                     f"{_money(o[A100]['usd_per_month'])} ({_deployment(o[A100])}) at {u:,}, so the sweep's "
                     f"winner there ({'L4' if sweep_l4 else 'A100'}) is not the planner's.")
    return text


def blocks(data: dict[str, Any]) -> dict[Path, str]:
    """The text between the markers, per file."""
    cmd = ("<!-- generated by `python scripts/reference_tables.py --write` from llmcap's JSON; "
           "edit the script, not this block -->")
    readme = [cmd, "", *readme_table(data), "", *notes(data)]
    ref = [cmd, "", *full_table(data), "", *notes(data)]
    return {README: "\n".join(readme) + "\n", REFERENCE: "\n".join(ref) + "\n"}


def replace_block(text: str, block: str, name: str) -> str:
    """`text` with the part between the markers replaced by `block` (one pair of markers, in order)."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise SystemExit(f"{name}: needs exactly one {BEGIN} followed by one {END}")
    start = text.index(BEGIN) + len(BEGIN)
    return text[:start] + "\n" + block + text[text.index(END):]


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename it over `path` (no half-written file)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true",
                    help="rewrite the blocks in README.md and docs/reference-scenario.md")
    ap.add_argument("--check", action="store_true", help="exit 1 when a committed block differs")
    args = ap.parse_args(argv)
    new = blocks(gather(cli_runner()))
    stale = []
    for path, block in new.items():
        old = path.read_text(encoding="utf-8")
        text = replace_block(old, block, str(path.relative_to(ROOT)))
        if text != old:
            stale.append(str(path.relative_to(ROOT)))
            if args.write:
                write_atomic(path, text)
        if not args.write and not args.check:
            print(f"## {path.relative_to(ROOT)}\n\n{block}")
    if args.check and stale:
        print(f"stale: {', '.join(stale)} (run python scripts/reference_tables.py --write)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
