"""`llmcap validate STACK_FILE` and `llmcap schema`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from sizing.catalog.lookup import load_catalog
from sizing.catalog.names import check_names
from sizing.cli.common import guarded
from sizing.errors import SpecError
from sizing.stack import DEFAULT_REGION, load_stack


@guarded
def validate(stack_file: Path = typer.Argument(..., help="stacks/Pulumi.<env>.yaml"),
             catalog: Path | None = typer.Option(None, "--catalog")) -> None:
    """Validate a stack file's llmcap config; print an OK summary or one line per problem (exit 2)."""
    from sizing.planning.meaning import meaning_checks

    stack = load_stack(stack_file)
    cat = load_catalog(catalog)
    check_names(stack, cat)
    errors, warnings = meaning_checks(stack, cat)
    if errors:
        raise SpecError(f"{len(errors)} problem(s)", errors)
    for line in list(stack.warnings) + warnings:
        typer.echo(f"warning: {line}", err=True)
    w, h = stack.workload, stack.hardware
    traffic = (f"{w.traffic.concurrent_users} concurrent users" if w.traffic.concurrent_users
               else f"{w.traffic.peak_requests_per_s:g} req/s peak")
    typer.echo(f"OK {stack_file}: stack {stack.name}, {w.model} [{', '.join(w.precisions)}], "
               f"{w.prompt_tokens.mean} in / {w.output_tokens.mean} out, {traffic}, "
               f"SLO {w.slo.describe()}, "
               f"{h.strategy}, {h.purchase}, redundancy {h.redundancy}, {stack.region}")


def schema() -> None:
    """Print the JSON Schema of the stack's llmcap config (for editors)."""
    from sizing.deployment import DeploymentOptions
    from sizing.spec import HardwareSpec, WorkloadSpec

    doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "llmcap stack config (the `config:` mapping of stacks/Pulumi.<env>.yaml)",
        "type": "object",
        "properties": {
            "aws:region": {"type": "string", "default": DEFAULT_REGION},
            "llmcap:workload": WorkloadSpec.model_json_schema(),
            "llmcap:hardware": HardwareSpec.model_json_schema(),
            "llmcap:deployment": DeploymentOptions.model_json_schema(),
            "llmcap:budget_usd_month": {"type": "number", "exclusiveMinimum": 0},
        },
        "required": ["llmcap:workload"],
    }
    typer.echo(json.dumps(doc, indent=2))
