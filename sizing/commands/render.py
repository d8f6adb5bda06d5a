"""`llmcap render STACK_FILE --out DIR`: the Pulumi program run offline under Pulumi's mock engine
(no AWS credentials, no Pulumi CLI). Writes DIR/resources.json (every resource with its engine
type token and camelCase inputs) and DIR/outputs.json; further writers register in
`infra.render.WRITERS`. pulumi and infra/ are imported inside the command only."""

from __future__ import annotations

from pathlib import Path

import typer

from sizing.commands.common import guarded


@guarded
def render(
    stack_file: Path = typer.Argument(..., help="stacks/Pulumi.<env>.yaml"),
    out: Path = typer.Option(..., "--out", help="folder to write resources.json (and more) into"),
    sets: list[str] = typer.Option([], "--set", help="override KEY=VALUE under the llmcap config"),
    catalog: Path | None = typer.Option(None, "--catalog", help="catalog directory (llmcap catalog refresh)"),
    target: str = typer.Option("eks", "--target", help="eks: the Pulumi program (resources.json, manifests/); "
                               "compose: docker-compose.yml for one GPU server"),
) -> None:
    """Render the deployment offline: what `pulumi up` would create for this stack, from its plan."""
    from sizing.catalog import load_catalog
    from sizing.commands.plan_cmd import plan_for
    from sizing.errors import SpecError
    from sizing.stack import load_stack

    if target not in ("eks", "compose"):
        raise SpecError(f"--target {target!r}: choose eks or compose")
    stack = load_stack(stack_file, sets)
    from sizing.weights_source import require_weights_source

    require_weights_source(load_catalog(catalog), stack.workload.model, stack.workload.weights_source)
    plan = plan_for(stack_file, sets, None, catalog)
    if target == "compose":
        from infra.compose import ComposeTargetError, write_compose

        try:
            written = write_compose(plan, out)
        except ComposeTargetError as e:
            raise SpecError(str(e)) from None
        for path in written:
            typer.echo(f"wrote {path}")
        return

    from infra.render import render_stack, write_render

    result = render_stack(stack, plan, load_catalog(catalog))
    for path in write_render(result, out):
        typer.echo(f"wrote {path}")
    typer.echo(f"{len(result.resources)} resources for stack {stack.name} "
               f"({', '.join(sorted({p.instance_type for p in plan.pools}))})")
