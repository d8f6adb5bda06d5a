"""The types every per-resource pricing module shares (a resource, the pricing context, one price
function) and the helpers that turn a catalog price into a monthly `CostLine` (USD per month, 730 h)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sizing.plan import CostLine

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog


@dataclass(frozen=True)
class Resource:
    """One resource: its Pulumi type token, logical name, inputs (camelCase) and stack."""

    type: str
    name: str
    inputs: dict[str, Any] = field(default_factory=dict)
    stack: str | None = None  # from the URN, when there is one


@dataclass(frozen=True)
class PricingContext:
    catalog: Catalog
    region: str
    # launch template logical name -> (nodes at desired size, node groups) of the node groups that use it;
    # filled by price_resources from the whole program (sizing.cost.resources.launch_template)
    template_nodes: dict[str, tuple[float, tuple[str, ...]]] = field(default_factory=dict)
    # node group logical name -> the instance type its launch template sets (a Capacity Block node group
    # names none itself); filled by price_resources likewise
    group_instance_types: dict[str, str] = field(default_factory=dict)


PriceFn = Callable[[Resource, PricingContext], list[CostLine]]


def hourly_line(name: str, quantity: float, unit: str, usd_per_hour: float | None, source: str) -> CostLine:
    from sizing.cost.money import HOURS_PER_MONTH

    return CostLine(name=name, quantity=quantity, unit=unit, source=source,
                    usd_per_month=None if usd_per_hour is None else round(usd_per_hour * quantity * HOURS_PER_MONTH, 2))


def platform_price(ctx: PricingContext, item: str) -> float | None:
    p = ctx.catalog.platform_price(item, ctx.region)
    return p.usd if p is not None else None


def num(v: Any, default: float | None = None) -> float | None:
    """A numeric input, or `default` when the preview shows it as unknown or absent."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default
