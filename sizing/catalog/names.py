"""The catalog checks a schema cannot make on a stack: its model, GPUs, instance types and region
exist in the catalog (one line per problem, naming the field, with "did you mean")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sizing.errors import CatalogLookupError, SpecError

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.stack import Stack


def check_names(stack: Stack, cat: Catalog) -> None:
    """Catalog checks a schema cannot do: the model, GPUs, instance types and region exist in `cat`."""
    problems: list[str] = []
    for fn in (lambda: cat.model(stack.workload.model), lambda: cat.check_region(stack.region)):
        try:
            fn()
        except CatalogLookupError as e:
            problems.extend(e.problems)
    for i, g in enumerate(stack.hardware.gpus or []):
        try:
            cat.gpu(g)
        except CatalogLookupError as e:
            problems.append(f"llmcap:hardware.gpus.{i}: {e.problems[0]}")
    for i, t in enumerate(stack.hardware.instance_types or []):
        try:
            cat.instance(t)
        except CatalogLookupError as e:
            problems.append(f"llmcap:hardware.instance_types.{i}: {e.problems[0]}")
    if problems:
        raise SpecError(f"{len(problems)} problem(s)", problems)
