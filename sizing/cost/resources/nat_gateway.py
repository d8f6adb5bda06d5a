"""NAT gateways: hourly charge. Data processing depends on traffic and is not priced."""

from __future__ import annotations

from sizing.cost.resources.base import PricingContext, Resource, hourly_line, platform_price
from sizing.plan import CostLine

RESOURCE_TYPES = ("aws:ec2/natGateway:NatGateway",)


def price(r: Resource, ctx: PricingContext) -> list[CostLine]:
    return [
        hourly_line("NAT gateways", 1, "gateways", platform_price(ctx, "NAT gateway hourly"),
                    f"platform_prices.csv; {r.type} {r.name}"),
        CostLine(name=f"NAT gateway data processing ({r.name})", quantity=0, unit="GB (usage-based)",
                 usd_per_month=None, source="usage-based: depends on traffic"),
    ]
