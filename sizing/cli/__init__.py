"""The `llmcap` command line (typer + rich): the app, which registers the commands (one module per
command group in sizing/cli/, each importing what it needs inside the command, so registering them
stays light). The console script is `llmcap = "sizing.cli:main"`.
Exit codes: 0 ok, 1 a check failed, 2 bad input, 3 infeasible, 70 a bug (its traceback is printed)."""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperGroup

try:  # typer ≥ 0.20 vendors click as typer._click; its exceptions are the ones raised
    from typer._click import exceptions as cx  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - older typer on upstream click
    from click import exceptions as cx  # type: ignore[no-redef,unused-ignore]

from sizing.cli import (
    aws_cmds,
    bench_cmds,
    catalog_cmds,
    compare_cmd,
    diff_cmd,
    estimate_cmd,
    eval_cmd,
    images_cmd,
    plan_cmd,
    render_cmd,
    report_cmd,
    validate_cmd,
)
from sizing.errors import EXIT_BUG


class OneLineErrors(TyperGroup):
    """Usage errors (an unknown option or command, a missing argument) as one `error:` line with the fix,
    exit 2, like llmcap's own errors, instead of click's usage box."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except cx.NoArgsIsHelpError as e:
            e.show()
            sys.exit(e.exit_code)
        except cx.NoSuchOption as e:
            hint = f" (did you mean {' or '.join(sorted(e.possibilities))}?)" if e.possibilities else ""
            _die(f"{e.option_name}: no such option{hint}; see `{_cmd(e)} --help`", 2)
        except cx.UsageError as e:
            _die(f"{_plain(e.format_message())}; see `{_cmd(e)} --help`", e.exit_code)
        except cx.ClickException as e:
            _die(_plain(e.format_message()), e.exit_code)
        except (typer.Abort, KeyboardInterrupt):
            _die("aborted", 130)
        except Exception:  # a bug: keep its traceback, and never exit 1 ("a check failed")
            import traceback

            traceback.print_exc()
            _die(f"llmcap stopped on a bug (the traceback above says where); exit {EXIT_BUG}", EXIT_BUG)
        if isinstance(rv, int) and not isinstance(rv, bool):  # typer.Exit(code) returns its code here
            sys.exit(rv)
        return rv


def _cmd(e: Any) -> str:
    ctx = getattr(e, "ctx", None)
    return ctx.command_path if ctx is not None else "llmcap"


def _plain(msg: str) -> str:
    return " ".join(msg.replace("\n", " ").split()).replace("Value error, ", "").rstrip(".")


def _die(msg: str, code: int) -> None:
    typer.echo(f"error: {msg}", err=True)
    sys.exit(code)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("llmcap")
        except PackageNotFoundError:
            v = "unknown (not installed; pip install -e .)"
        typer.echo(f"llmcap {v}")
        raise typer.Exit(0)


app = typer.Typer(
    cls=OneLineErrors,
    name="llmcap",
    help="Capacity planning and Pulumi infrastructure for serving open LLMs with vLLM on AWS.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print llmcap's version and exit")) -> None:
    """Capacity planning and Pulumi infrastructure for serving open LLMs with vLLM on AWS."""


app.command("plan")(plan_cmd.plan)
app.command("estimate")(estimate_cmd.estimate)
app.command("compare")(compare_cmd.compare)
app.command("diff")(diff_cmd.diff)
app.command("render")(render_cmd.render)
app.command("validate")(validate_cmd.validate)
app.command("schema")(validate_cmd.schema)
app.command("models")(catalog_cmds.models)
app.command("gpus")(catalog_cmds.gpus)
app.command("instances")(catalog_cmds.instances)
app.command("preflight")(aws_cmds.preflight)
app.command("bench")(bench_cmds.bench)
app.command("verify")(bench_cmds.verify)
app.command("calibrate")(bench_cmds.calibrate)
app.command("report")(report_cmd.report)
app.command("eval")(eval_cmd.eval_)
app.command("rollout")(report_cmd.rollout)
app.add_typer(aws_cmds.catalog_app, name="catalog")
app.add_typer(images_cmd.images_app, name="images")


def main() -> None:
    app(prog_name="llmcap")

