"""Stand-alone EBS volumes (gp3 priced; other types not priced until the catalog has them)."""

from __future__ import annotations

from sizing.cost.resources.base import PricingContext, Resource, num, platform_price
from sizing.plan import CostLine

RESOURCE_TYPES = ("aws:ebs/volume:Volume",)
GB_PER_GIB = 2**30 / 1e9


def price(r: Resource, ctx: PricingContext) -> list[CostLine]:
    kind = str(r.inputs.get("type") or "gp3")
    size_gib = num(r.inputs.get("size"))
    unit_usd = platform_price(ctx, f"EBS {kind} storage") if kind == "gp3" else None
    gb = round(size_gib * GB_PER_GIB, 1) if size_gib is not None else 0.0
    usd = None if unit_usd is None or size_gib is None else round(unit_usd * gb, 2)
    return [CostLine(name=f"EBS volume ({kind}, {r.name})", quantity=gb, unit="GB", usd_per_month=usd,
                     source=f"platform_prices.csv; {r.type} {r.name}")]
