"""Optional extras: which command needs which, and the one line a user sees when one is missing.

`pip install llmcap` installs what `llmcap plan / estimate / compare / diff / validate` need; the rest
comes with an extra of pyproject.toml's [project.optional-dependencies] (tests/test_extras.py checks
that this table and pyproject.toml agree):

- infra: pulumi, pulumi-aws, pulumi-kubernetes, pulumi-tls (`llmcap render`, the Pulumi program of `pulumi up`)
- aws:   boto3 (`llmcap preflight`, `llmcap catalog refresh`)
- bench: httpx (`llmcap bench`, the load generator; `llmcap eval`, the quality gate)
- plot:  matplotlib (`llmcap compare --sweep ... --plot`; the figures of `llmcap report`, which without it
  writes the document without them and says so)

A command checks its extra before it plans or writes anything (`require`); `sizing.cli.common.guarded`
turns a missing extra's ModuleNotFoundError raised later into the same line, so no command shows a
traceback for a missing extra. Imports only the standard library and sizing.errors."""

from __future__ import annotations

import importlib.util

from sizing.errors import EXIT_BAD_INPUT, LlmcapError

# top-level import name -> the extra that installs it
EXTRA_OF: dict[str, str] = {
    "pulumi": "infra", "pulumi_aws": "infra", "pulumi_kubernetes": "infra", "pulumi_tls": "infra",
    "boto3": "aws", "botocore": "aws",
    "httpx": "bench",
    "matplotlib": "plot",
}


class MissingExtraError(LlmcapError):
    """A command needs a package of an optional extra that is not installed (exit 2)."""

    exit_code = EXIT_BAD_INPUT


def missing_extra(command: str, module: str) -> MissingExtraError:
    """The one-line error for `command` (e.g. "llmcap render") missing the top-level module `module`."""
    extra = EXTRA_OF[module]
    return MissingExtraError(f"{command} needs {module}, which is not installed: pip install -e '.[{extra}]' "
                             f"in a checkout, or pip install 'llmcap[{extra}]'")


def installed(module: str) -> bool:
    """Whether the top-level `module` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install, or sys.modules[module] set to None
        return False


def require(command: str, *modules: str) -> None:
    """Raise MissingExtraError for the first of `modules` that is not installed."""
    for m in modules:
        if not installed(m):
            raise missing_extra(command, m)


def extra_missing_in(e: ModuleNotFoundError) -> str | None:
    """The top-level module of an optional extra that `e` failed to import, or None for any other module
    (a missing project module stays a bug with its traceback)."""
    root = (e.name or "").split(".")[0]
    return root if root in EXTRA_OF else None
