"""Typed errors. An expected error prints one line per problem and maps to an exit code;
anything else is a bug and keeps its traceback."""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INFEASIBLE = 3
# a bug (an exception no command expects): its traceback, then this code (sysexits.h EX_SOFTWARE), never 1,
# which the cost-gate workflow reads as "a gate was crossed"
EXIT_BUG = 70


class LlmcapError(Exception):
    """Base of every expected error. `problems` are the lines shown to the user."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


class SpecError(LlmcapError):
    """The stack file or a CLI input is invalid (exit 2)."""


class CatalogLookupError(LlmcapError):
    """A model, GPU, instance or region is not in the catalog (exit 2)."""


class NoFeasiblePlanError(LlmcapError):
    """No candidate meets the SLO and memory limits (exit 3). `rejections` says why each failed."""

    exit_code = EXIT_INFEASIBLE

    def __init__(self, message: str, problems: list[str] | None = None,
                 rejections: list[dict[str, str]] | None = None,
                 suggestions: list[str] | None = None) -> None:
        super().__init__(message, problems)
        self.rejections = rejections or []
        self.suggestions = suggestions or []
        # each suggestion re-planned: {"change", "set", "plan", "gpus", "usd_per_month"}
        self.suggestion_details: list[dict[str, Any]] = []


class CheckFailedError(LlmcapError):
    """A check (preflight, budget gate, verify) failed (exit 1)."""

    exit_code = EXIT_CHECK_FAILED


class CatalogDataError(LlmcapError):
    """A catalog data file (bundled, `--catalog DIR`, $LLMCAP_CATALOG_DIR or the refresh cache) does not
    match sizing/data/schema.yaml: a missing column, a short row, a non-number (exit 2)."""


class PerfModelError(LlmcapError):
    """The performance model lacks a figure it needs (e.g. a GPU with no compute figure)."""
