"""`llmcap compare`: stacks (or strategies of one stack) side by side, a verdict, and sweeps with
crossovers and an optional plot. matplotlib is imported only when --plot is given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from sizing.cli.common import Format, console, guarded

if TYPE_CHECKING:
    from sizing.analysis.comparison import Option


def options_for(stack_files: list[Path], strategies: str | None, sets: list[str] | None,
                catalog: Path | None) -> list[Option]:
    """One option per stack, or per stack × strategy with --strategies (validated, names checked)."""
    from sizing.analysis.comparison import Option
    from sizing.catalog.lookup import load_catalog
    from sizing.catalog.names import check_names
    from sizing.errors import SpecError
    from sizing.planning.search import STRATEGIES
    from sizing.stack import load_stack

    strats = [s.strip() for s in strategies.split(",") if s.strip()] if strategies is not None else []
    if strategies is not None and not strats:
        raise SpecError("--strategies: list at least one strategy, e.g. scale-up,scale-out,mixed")
    for s in strats:
        if s not in STRATEGIES:
            raise SpecError(f"--strategies: {s!r} is not one of {', '.join(STRATEGIES)}")
    if len(stack_files) * max(len(strats), 1) < 2:
        raise SpecError("compare needs two or more options: give two stack files, or one with "
                        "--strategies scale-up,scale-out,mixed")
    out: list[Option] = []
    for f in stack_files:
        st = load_stack(f, sets)
        check_names(st, load_catalog(catalog))
        if strats:
            out += [Option(f"{st.name} {s}" if len(stack_files) > 1 else s, st, s) for s in strats]
        else:
            out.append(Option(st.name, st, st.hardware.strategy))
    labels = [o.label for o in out]
    if len(set(labels)) != len(labels):
        raise SpecError(f"compare: two options share a name ({', '.join(labels)}); give distinct stack files")
    return out


@guarded
def compare(
    stack_files: list[Path] = typer.Argument(..., help="stacks/Pulumi.<env>.yaml (two or more, or one with "
                                                         "--strategies)"),
    strategies: str | None = typer.Option(None, "--strategies", help="e.g. scale-up,scale-out,mixed"),
    sets: list[str] = typer.Option([], "--set", help="override KEY=VALUE under the llmcap config (every stack)"),
    sweep: str | None = typer.Option(None, "--sweep", help="VAR=LO..HI[:POINTS|/STEP], VAR one of users, rate, "
                                                            "prompt_tokens, itl_ms (default 60 log-spaced points)"),
    plot: Path | None = typer.Option(None, "--plot", help="write the sweep plot (PNG) here; needs --sweep"),
    fmt: Format = typer.Option(Format.table, "--format"),
    out: Path | None = typer.Option(None, "--out", help="also write the comparison JSON here"),
    catalog: Path | None = typer.Option(None, "--catalog", help="catalog directory (llmcap catalog refresh)"),
) -> None:
    """Compare deployments side by side: GPUs, $/month, $/1M tokens, SLO headroom, blast radius, cold start."""
    from sizing.analysis.compare import compare_options
    from sizing.analysis.sweep import parse_sweep, run_sweep
    from sizing.catalog.lookup import load_catalog
    from sizing.errors import EXIT_INFEASIBLE, SpecError
    from sizing.planning.planner import plan_validated

    spec = parse_sweep(sweep) if sweep is not None else None
    if plot is not None and spec is None:
        raise SpecError("--plot: needs --sweep (the plot shows cost against the swept variable)")
    if plot is not None and plot.suffix.lower() != ".png":
        raise SpecError(f"--plot: {str(plot)!r} must end in .png")
    if plot is not None:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            raise SpecError("--plot needs matplotlib: pip install 'llmcap[plot]' (or pip install matplotlib)")
    opts = options_for(stack_files, strategies, sets, catalog)
    cat = load_catalog(catalog)
    # the planner `llmcap plan` runs (flags tuned); the sweep's points stay analytic (sizing.analysis.sweep)
    result = compare_options(opts, lambda o: plan_validated(o.stack, cat, o.strategy))
    result = result.with_sweep(run_sweep(opts, spec, cat) if spec is not None else None)
    doc = json.dumps(result.model_dump(mode="json"), indent=2)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(doc + "\n")
    if plot is not None and result.sweep is not None:
        from sizing.report.plot import plot_sweep

        plot_sweep(result.sweep, plot, f"{', '.join(o.label for o in opts)}: GPU cost vs {result.sweep.label}")
    if fmt == Format.json:
        typer.echo(doc)
    elif fmt == Format.markdown:
        from sizing.report.compare_views import render_markdown

        typer.echo(render_markdown(result), nl=False)
    else:
        from sizing.report.compare_views import render_table

        render_table(result, console())
    if plot is not None and fmt != Format.json:
        typer.echo(f"plot: {plot}")
    if result.winner is None:  # nothing meets the SLO: the same exit code as `llmcap plan`
        raise typer.Exit(EXIT_INFEASIBLE)
