"""The `llmcap` command line (typer + rich). Commands live in sizing/commands/; this module
only registers them. Exit codes: 0 ok, 1 a check failed, 2 bad input, 3 infeasible."""

from __future__ import annotations

import typer

from sizing.commands import (
    aws_cmds,
    bench_cmds,
    catalog_cmds,
    compare_cmd,
    diff_cmd,
    estimate,
    plan_cmd,
    render,
    validate,
)

app = typer.Typer(
    name="llmcap",
    help="Capacity planning and Pulumi infrastructure for serving open LLMs with vLLM on AWS.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.command("plan")(plan_cmd.plan)
app.command("estimate")(estimate.estimate)
app.command("compare")(compare_cmd.compare)
app.command("diff")(diff_cmd.diff)
app.command("render")(render.render)
app.command("validate")(validate.validate)
app.command("schema")(validate.schema)
app.command("models")(catalog_cmds.models)
app.command("gpus")(catalog_cmds.gpus)
app.command("instances")(catalog_cmds.instances)
app.command("preflight")(aws_cmds.preflight)
app.command("bench")(bench_cmds.bench)
app.command("verify")(bench_cmds.verify)
app.command("calibrate")(bench_cmds.calibrate)
app.add_typer(aws_cmds.catalog_app, name="catalog")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
