"""`llmcap render STACK_FILE --out DIR`: the Pulumi program run offline under Pulumi's mock engine
(no AWS credentials, no Pulumi CLI). Writes DIR/resources.json (every resource with its engine
type token and camelCase inputs) and DIR/outputs.json; further writers register in
`infra.render.WRITERS`. pulumi and infra/ are imported inside the command only.

Which plan: the stack's saved plan (stacks/Pulumi.<env>.plan.json) when it has one, as `pulumi up`
deploys it; a fresh plan with --fresh or --set, or, with a warning, when none is saved yet (a new
stack can be rendered before its first `llmcap plan --write`). The output's first line says which."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from sizing.cli.common import guarded

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.plan import Plan
    from sizing.stack import Stack


def plan_to_render(stack_file: Path, sets: list[str], catalog: Path | None, fresh: bool
                   ) -> tuple[Stack, Plan, Catalog, str, str]:
    """The stack, the plan to render, the catalog the program reads, one line saying which plan,
    and a warning for stderr ("" when none).

    The saved plan (`llmcap plan STACK --write`) when there is one, exactly as `pulumi up` deploys it;
    a fresh plan with --fresh or --set (a preview of a change), or, with a warning, when the stack has
    no saved plan yet. A saved plan that no longer matches its stack file is refused (one line)."""
    from sizing.catalog.lookup import load_catalog
    from sizing.planning.pinned_catalog import PinnedCatalog
    from sizing.planning.planner import plan_for
    from sizing.planning.saved_plan import StalePlanError, read_saved_plan, saved_plan_path
    from sizing.stack import load_stack

    stack = load_stack(stack_file, sets)
    plan_file = saved_plan_path(stack_file)
    saved = None if fresh or sets else read_saved_plan(plan_file, str(stack_file))
    if saved is None:
        why = "--fresh" if fresh else "--set" if sets else f"no saved plan {plan_file}"
        note = (f"plan: planned now from this machine's catalog ({why}); pulumi up deploys only a saved plan: "
                f"llmcap plan {stack_file} --write")
        warning = "" if fresh or sets else f"warning: {stack_file} has no saved plan; rendering a fresh plan"
        return stack, plan_for(stack_file, sets, None, catalog), load_catalog(catalog), note, warning
    from sizing.planning.saved_plan import check_current

    try:
        check_current(saved, stack, str(stack_file))
    except StalePlanError as e:
        raise StalePlanError(e.problems[0] + " (or preview the change with llmcap render --fresh)") from None
    warning = "" if catalog is None else ("warning: --catalog is ignored: the saved plan pins the catalog rows it "
                                          "was planned with (use --fresh to plan with another catalog)")
    return stack, saved.plan, PinnedCatalog(saved.pinned), f"plan: saved {plan_file} (matches {stack_file})", \
        warning


@guarded
def render(
    stack_file: Path = typer.Argument(..., help="stacks/Pulumi.<env>.yaml"),
    out: Path = typer.Option(..., "--out", help="folder to write resources.json (and more) into; an earlier "
                             "render there is replaced whole, any other non-empty folder refused"),
    sets: list[str] = typer.Option([], "--set", help="override KEY=VALUE under the llmcap config (plans fresh)"),
    catalog: Path | None = typer.Option(None, "--catalog", help="catalog directory (llmcap catalog refresh); "
                                        "with --fresh or without a saved plan"),
    target: str = typer.Option("eks", "--target", help="eks: the Pulumi program (resources.json, manifests/); "
                               "compose: docker-compose.yml for one GPU server"),
    fresh: bool = typer.Option(False, "--fresh", help="plan now instead of rendering the saved plan "
                               "(a preview of what llmcap plan --write would save)"),
) -> None:
    """Render the deployment offline: what `pulumi up` would create for this stack, from its saved plan."""
    from sizing.cli.render_dir import check_replaceable, render_into
    from sizing.errors import SpecError

    if target not in ("eks", "compose"):
        raise SpecError(f"--target {target!r}: choose eks or compose")
    if target == "eks":  # the Pulumi program under the mock engine; compose needs no pulumi
        from sizing.cli.extras import require

        require("llmcap render", "pulumi", "pulumi_aws", "pulumi_kubernetes", "pulumi_tls")
    check_replaceable(out)  # a folder that may not be replaced is refused before anything is planned or printed
    stack, plan, cat, which, warning = plan_to_render(stack_file, sets, catalog, fresh)
    from sizing.catalog.weights_source import require_weights_source

    require_weights_source(cat, stack.workload.model, stack.workload.weights_source)
    # the image digests from the lock beside the stack file, or one line naming `llmcap images lock`
    from infra.compose import COMPOSE_IMAGES
    from infra.config.image_lock import resolve_pins
    from infra.kubernetes.engines import images_in_use
    from infra.kubernetes.pulled_images import installed_chart_keys, pulled_image_keys

    # only the images this target pulls count (the compose server runs its pools' engine and Prometheus)
    pulled = (tuple(images_in_use(plan, COMPOSE_IMAGES)) if target == "compose"
              else pulled_image_keys(plan, stack.deployment.provisioner))
    pins = resolve_pins(stack_file, stack.deployment.allow_unpinned_images, pulled)
    if warning:  # only once the stack is renderable: an error stays one line
        typer.echo(warning, err=True)
    if target == "compose":
        from infra.compose import ComposeTargetError, write_compose

        try:
            written, note = render_into(out, stack.name, target, lambda d: write_compose(plan, d, pins))
        except ComposeTargetError as e:
            raise SpecError(str(e)) from None
        _report(which, note, written, pins.warning())
        return

    from infra.fit.check import FitContext, NotDeployable, check_deployable, print_fit_table
    from infra.program import render_stack
    from infra.render import write_render
    from sizing.cli.common import console
    from sizing.stack import apply_overrides, read_config

    cfg = apply_overrides(read_config(stack_file), sets)
    raw_key = cfg.get("llmcap:api_key")
    # a plain `llmcap:api_key` in the stack file is checked (an empty one is refused); a secret is not read
    api_key = ("" if "llmcap:api_key" in cfg and raw_key is None  # `api_key:` / `--set api_key=` (YAML null)
               else raw_key if isinstance(raw_key, str) else None)
    # `--set hf_token=` (or `hf_token:` with no value) says there is none; a secret in the stack file is not read
    no_token = "llmcap:hf_token" in cfg and not cfg.get("llmcap:hf_token")
    report = check_deployable(FitContext(stack=stack, plan=plan, catalog=cat, api_key=api_key,
                                         extra={"image_pins": pins, "hf_token_set": not no_token}))
    typer.echo(which)
    for line in (pins.warning(), pins.charts_note(installed_chart_keys(plan, stack.deployment.provisioner))):
        if line:
            typer.echo(line, err=True)
    con = console()
    print_fit_table(report, con.print, con.width)
    if not report.ok:  # refuse before writing anything
        raise NotDeployable(report)
    result = render_stack(stack, plan, cat, pins)
    written, note = render_into(out, stack.name, target, lambda d: write_render(result, d))
    _report(None, note, written)
    typer.echo(f"{len(result.resources)} resources for stack {stack.name} "
               f"({', '.join(sorted({p.instance_type for p in plan.pools}))})")


def _report(which: str | None, note: str, written: list[Path], pins_warning: str = "") -> None:
    if which is not None:
        typer.echo(which)
    if pins_warning:
        typer.echo(pins_warning, err=True)
    if note:
        typer.echo(note)
    for path in written:
        typer.echo(f"wrote {path}")
