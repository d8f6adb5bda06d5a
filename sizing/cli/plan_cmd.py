"""`llmcap plan STACK_FILE`: the cheapest deployment that meets the SLO, and what it costs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from sizing.cli.common import Format, console, emit_json, guarded

if TYPE_CHECKING:
    from sizing.plan import Plan


def _write_saved(stack_file: Path, p: Plan, catalog: Path | None) -> None:
    """Save the plan beside its stack file, with the fingerprint of the stack's spec."""
    from sizing.catalog.lookup import load_catalog
    from sizing.planning.saved_plan import make_saved_plan, saved_plan_path, write_saved_plan
    from sizing.stack import load_stack

    path = saved_plan_path(stack_file)
    saved = make_saved_plan(stack_file, load_stack(stack_file), p, load_catalog(catalog))
    write_saved_plan(saved, path)
    cat = {f.source for f in saved.generation.catalog} - {"bundled"}
    src = "bundled catalog" if not cat else f"catalog from {', '.join(sorted(cat))}"
    if saved.generation.overlay is not None:
        src += f" and the calibration overlay {saved.generation.overlay.source}"
    typer.echo(f"wrote {path} ({src}); review it with git diff: pulumi up deploys this plan", err=True)


def infeasible_document(stack_file: Path, e: Any) -> dict[str, Any]:
    """What `plan --format json` prints when nothing is feasible (exit 3): the causes, every rejected
    candidate, and the suggestions, each re-planned and priced."""
    return {"feasible": False, "stack": stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml"),
            "message": str(e.args[0]) if e.args else "", "problems": e.problems, "rejections": e.rejections,
            "suggestions": e.suggestion_details or [{"change": s} for s in e.suggestions]}


def _preflight(p: Any) -> list[str]:
    """--preflight's warnings; without the aws extra one warning says how to get it, and the plan still prints
    (preflight is advice on top of a plan, never a reason to withhold it)."""
    try:
        from sizing.adapters.aws import preflight_warnings
    except ModuleNotFoundError as e:
        from sizing.cli.extras import extra_missing_in, missing_extra

        module = extra_missing_in(e)
        if module is None:
            raise
        return ["preflight skipped: " + missing_extra("llmcap plan --preflight", module).problems[0]]
    return preflight_warnings(p, p.region)


@guarded
def plan(
    stack_file: Path = typer.Argument(..., help="stacks/Pulumi.<env>.yaml"),
    sets: list[str] = typer.Option([], "--set", help="override KEY=VALUE under the llmcap config, "
                                                     "e.g. workload.traffic.concurrent_users=1000"),
    strategy: str | None = typer.Option(None, "--strategy", help="auto|scale-up|scale-out|mixed"),
    fmt: Format = typer.Option(Format.table, "--format"),
    out: Path | None = typer.Option(None, "--out", help="also write the Plan JSON here"),
    catalog: Path | None = typer.Option(None, "--catalog", help="catalog directory (llmcap catalog refresh)"),
    preflight: bool = typer.Option(False, "--preflight", help="check AWS quotas and offerings (warnings only)"),
    write: bool = typer.Option(False, "--write", help="save the plan beside the stack file "
                               "(stacks/Pulumi.<env>.plan.json): the plan `pulumi up` and `llmcap render` deploy"),
    search_budget: float | None = typer.Option(None, "--search-budget", help="CPU seconds the planner's search may "
                                               "take (default: the stack's hardware.search_budget_s, 30); when spent, "
                                               "the best fleet found so far, said so"),
) -> None:
    """Plan a stack: GPUs, instances, $/hour, $/month, $/1M tokens, and the hosted-API comparison."""
    from sizing.errors import NoFeasiblePlanError, SpecError
    from sizing.planning.planner import plan_for

    if write and (sets or strategy or search_budget is not None):
        raise SpecError(f"--write saves the plan of {stack_file} as written: put the --set/--strategy/--search-budget "
                        "change into the stack file instead")
    if search_budget is not None:
        sets = [*sets, f"hardware.search_budget_s={search_budget!r}"]
    try:
        p = plan_for(stack_file, sets, strategy, catalog)
    except NoFeasiblePlanError as e:
        if fmt != Format.json:
            raise
        emit_json(infeasible_document(stack_file, e))  # stdout: the JSON object for machines
        for line in e.problems:  # stderr: the same causes in one line each, as without --format json
            typer.echo(f"error: {line}", err=True)
        raise typer.Exit(e.exit_code) from None
    if write:
        _write_saved(stack_file, p, catalog)
    if preflight:
        p.warnings.extend(_preflight(p))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(p.to_json())
    if fmt == Format.json:
        typer.echo(p.to_json())
    elif fmt == Format.markdown:
        from sizing.report.plan_views import render_markdown

        typer.echo(render_markdown(p))
    else:
        from sizing.report.plan_views import render_table

        render_table(p, console())
