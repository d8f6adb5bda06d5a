"""`llmcap report STACK --out DIR`: the capacity design document (HTML, its PDF, the Markdown source,
the figures as SVG, and `design.json`, the typed inputs every number comes from), and
`llmcap rollout STACK`: the staged rollout with its commands and thresholds.

Every figure comes from plans made by the same planner call as `llmcap plan` (sizing.planning.planner
.plan_for with --set overrides); the sweeps are sizing.analysis.sweep's. The PDF is printed from the
HTML by headless Chromium when one is installed (Debian: apt-get install chromium), else skipped with
a line saying so. Everything is written to a staging folder first and moved in only once complete.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from sizing.cli.common import TableOrJson, console, emit_json, guarded

if TYPE_CHECKING:
    from sizing.report.design_doc import DesignInputs
    from sizing.report.document import Figure

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PDF_TIMEOUT_S = 120  # a hang guard for the browser, far above its usual 2-5 s
USERS_SWEEP = "users=10..2000:16"
ITL_SWEEP = "itl_ms=10..60/5"
FILES = ("design.html", "design.md", "design.json", "design.pdf", "users.svg", "itl.svg")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def print_pdf(chromium: str, html_file: Path, pdf_file: Path) -> str | None:
    """Print `html_file` to `pdf_file` with headless Chromium; None when it worked, else why not."""
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
           f"--print-to-pdf={pdf_file}", html_file.resolve().as_uri()]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=PDF_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{chromium} failed: {e}"
    if r.returncode != 0 or not pdf_file.is_file() or pdf_file.stat().st_size == 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"{chromium} exited {r.returncode}: {tail[0]}"
    return None


def design_inputs(stack_file: Path, sets: list[str], catalog: Path | None,
                  figures: bool) -> tuple[DesignInputs, dict[str, Any]]:
    """Plan the stack, its capacity table, purchase options and sweeps; the document's typed inputs and
    their JSON."""
    from sizing.analysis.arithmetic import arithmetic
    from sizing.analysis.capacity import capacity_table, purchase_options
    from sizing.analysis.compare import blast_radius, compare_options
    from sizing.analysis.comparison import Option
    from sizing.analysis.sweep import parse_sweep, run_sweep
    from sizing.catalog.lookup import load_catalog
    from sizing.measure.rollout import stages
    from sizing.planning.planner import plan_for, plan_stack
    from sizing.report.design_doc import DesignInputs, FitRecord
    from sizing.report.plan_views import plan_text
    from sizing.stack import load_stack

    plan = plan_for(stack_file, sets, None, catalog)
    cat = load_catalog(catalog)
    cal = cat.calibration

    def plan_with(extra: list[str]) -> Any:
        return plan_for(stack_file, [*sets, *extra], None, catalog)

    table = capacity_table(plan, list(cat.gpus), plan_with)
    purchase = purchase_options(plan, plan_with)
    stack = load_stack(stack_file, sets)
    opts = [Option(s, stack, s) for s in ("scale-up", "scale-out")]
    # default batching flags, as `llmcap compare` plans options (so the verdict agrees with the sweeps)
    comparison = compare_options(opts, lambda o: plan_stack(o.stack, cat, o.strategy, tune_batching=False))
    users_sweep = run_sweep(opts, parse_sweep(USERS_SWEEP), cat) if stack.workload.traffic.concurrent_users else None
    itl_sweep = run_sweep(opts, parse_sweep(ITL_SWEEP), cat)
    figs: dict[str, Figure] = {}
    if figures:
        from sizing.report.document import Figure
        from sizing.report.plot import sweep_svg

        if users_sweep is not None:
            figs["users"] = Figure(sweep_svg(users_sweep, f"{plan.model}: GPU cost vs concurrent users"),
                                   "users.svg", "Scale-up vs scale-out: GPU $/month and $/1M output tokens "
                                   "against concurrent users (shaded: no plan meets the SLO)")
        figs["itl"] = Figure(sweep_svg(itl_sweep, f"{plan.model}: GPU cost vs ITL p95 target"), "itl.svg",
                             "Scale-up vs scale-out against the ITL p95 target (ms)")
    fit = FitRecord(fitted_on=cal.fitted_on, source_file=cal.source_file, rows=cal.rows,
                    held_out={k: float(v) for k, v in cal.fit_error.get("held_out", {}).items()
                              if isinstance(v, (int, float))},
                    goodput_range=cal.goodput_range)
    d = DesignInputs(plan=plan, text=plan_text(plan), stack_file=str(stack_file), capacity=table, purchase=purchase,
                     arithmetic=arithmetic(plan, cat), stages=stages(plan, cal, str(stack_file)), fit=fit,
                     blast_radius=blast_radius(plan), comparison=comparison, users_sweep=users_sweep,
                     itl_sweep=itl_sweep, figures=figs)
    doc = {"schema_version": 1, "stack": str(stack_file), "sets": sets, "plan": plan.model_dump(mode="json"),
           "capacity": table.model_dump(mode="json"), "purchase": [c.model_dump(mode="json") for c in purchase],
           "arithmetic": d.arithmetic.model_dump(mode="json"), "stages": [s.model_dump(mode="json") for s in d.stages],
           "comparison": comparison.model_dump(mode="json"),
           "sweeps": {k: s.model_dump(mode="json") for k, s in (("users", users_sweep), ("itl", itl_sweep))
                      if s is not None}}
    return d, doc


def _stage_files(out: Path) -> Path:
    if out.exists() and not out.is_dir():
        from sizing.errors import SpecError

        raise SpecError(f"--out: {out} is a file; give a folder")
    out.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=out, prefix=".report-"))


@guarded
def report(
    stack_file: Path = typer.Argument(..., help="stacks/Pulumi.<env>.yaml"),
    out: Path = typer.Option(..., "--out", help="folder for design.html, design.pdf, design.md, figures"),
    sets: list[str] = typer.Option([], "--set", help="override KEY=VALUE under the llmcap config"),
    pdf: bool = typer.Option(True, "--pdf/--no-pdf", help="print the HTML to PDF with headless Chromium"),
    catalog: Path | None = typer.Option(None, "--catalog", help="catalog directory (llmcap catalog refresh)"),
) -> None:
    """The capacity design document: summary, requirements, capacity by hardware, scale-up vs scale-out,
    arithmetic, cost, operations, rollout, assumptions and the model's error."""
    from sizing.cli.extras import installed
    from sizing.report.design_doc import design_document
    from sizing.report.document import to_html, to_markdown

    figures = installed("matplotlib")
    d, doc_json = design_inputs(stack_file, sets, catalog, figures)
    doc = design_document(d)
    stage = _stage_files(out)
    try:
        (stage / "design.md").write_text(to_markdown(doc))
        (stage / "design.html").write_text(to_html(doc))
        (stage / "design.json").write_text(json.dumps(doc_json, indent=2) + "\n")
        for fig in d.figures.values():
            (stage / fig.file).write_text(fig.svg)
        pdf_note = "pdf: not asked for (--no-pdf)"
        if pdf:
            chromium = find_chromium()
            if chromium is None:
                pdf_note = "pdf: not written: no Chromium found (Debian: apt-get install chromium)"
            else:
                why = print_pdf(chromium, stage / "design.html", stage / "design.pdf")
                pdf_note = f"pdf: printed by {chromium}" if why is None else f"pdf: not written: {why}"
        for name in FILES:
            (out / name).unlink(missing_ok=True)
        for f in sorted(stage.iterdir()):
            f.replace(out / f.name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    if not figures:
        typer.echo("figures: not drawn (pip install 'llmcap[plot]' for matplotlib)", err=True)
    written = ", ".join(n for n in FILES if (out / n).exists())
    typer.echo(f"wrote {out}/: {written}")
    typer.echo(pdf_note)


@guarded
def rollout(
    stack_file: Path = typer.Argument(..., help="stacks/Pulumi.<env>.yaml"),
    sets: list[str] = typer.Option([], "--set", help="override KEY=VALUE under the llmcap config"),
    catalog: Path | None = typer.Option(None, "--catalog", help="catalog directory (llmcap catalog refresh)"),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
) -> None:
    """The staged rollout (canary one replica -> ten percent -> full): commands and pass thresholds."""
    from sizing.catalog.lookup import load_catalog
    from sizing.measure.rollout import stages
    from sizing.planning.planner import plan_for

    plan = plan_for(stack_file, sets, None, catalog)
    got = stages(plan, load_catalog(catalog).calibration, str(stack_file))
    if fmt == TableOrJson.json:
        emit_json([s.model_dump(mode="json") for s in got])
        return
    from rich.table import Table

    c = console()
    for s in got:
        t = Table(title=f"stage {s.name}: {s.what} ({s.replicas} replica{'s' if s.replicas != 1 else ''}, "
                        f"{s.demand_share:.0%} of demand)")
        for col in ("criterion", "limit", "source"):
            t.add_column(col, overflow="fold")
        for th in s.thresholds:
            t.add_row(th.criterion, th.limit, th.source)
        c.print(t)
        for cmd in s.commands:
            c.print(f"  $ {cmd}", highlight=False, soft_wrap=True)
