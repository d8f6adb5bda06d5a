"""What every command shares: the error guard (one line per problem, exit code, no traceback),
output formats and the rich console."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

import typer

from sizing.errors import EXIT_BAD_INPUT, LlmcapError

F = TypeVar("F", bound=Callable[..., Any])


class Format(StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"


class TableOrJson(StrEnum):
    table = "table"
    json = "json"


def console() -> Any:
    """A rich console on stdout; width from $COLUMNS (tests pin it), else the terminal's."""
    from rich.console import Console

    width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else None
    return Console(width=width or 120 if not sys.stdout.isatty() else width, soft_wrap=False)


def fail(problems: list[str], code: int) -> None:
    for p in problems:
        typer.echo(f"error: {p}", err=True)
    raise typer.Exit(code)


def guarded(fn: F) -> F:
    """Turn expected errors into one line per problem and the error's exit code; so is a missing optional
    extra (sizing.cli.extras), named after the function (`catalog_refresh` -> `llmcap catalog refresh`)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LlmcapError as e:
            extra = list(getattr(e, "suggestions", []) or [])
            fail(e.problems + [f"to make it feasible: {s}" for s in extra], e.exit_code)
        except KeyboardInterrupt:
            fail(["interrupted"], 130)
        except RecursionError:
            fail(["input is nested too deeply"], EXIT_BAD_INPUT)
        except ModuleNotFoundError as e:  # an optional extra (pulumi, boto3, ...) not installed: one line
            from sizing.cli.extras import extra_missing_in, missing_extra

            module = extra_missing_in(e)
            if module is None:
                raise
            err = missing_extra("llmcap " + fn.__name__.replace("_", " "), module)
            fail(err.problems, err.exit_code)
        return None

    return wrapper  # type: ignore[return-value]


def emit_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))
