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
    for i, c in enumerate(stack.hardware.capacity):
        at = f"llmcap:hardware.capacity.{i}"
        try:
            cat.instance(c.instance_type)
        except CatalogLookupError as e:
            problems.append(f"{at}.instance_type: {e.problems[0]}")
            continue
        azs = cat.offered_azs(c.instance_type, stack.region)
        if azs and c.availability_zone_id not in azs:
            problems.append(f"{at}.availability_zone_id: {c.availability_zone_id} does not offer {c.instance_type} in "
                            f"{stack.region} (catalog offerings: {', '.join(azs)}); use the AvailabilityZoneId that "
                            "aws ec2 describe-capacity-reservations prints")
    if problems:
        raise SpecError(f"{len(problems)} problem(s)", problems)
