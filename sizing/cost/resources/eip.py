"""Elastic IPs: every public IPv4 address is billed by the hour (since 2024-02), attached or not."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sizing.cost.resources.base import PricingContext, Resource, hourly_line, platform_price

if TYPE_CHECKING:
    from sizing.plan import CostLine

RESOURCE_TYPES = ("aws:ec2/eip:Eip",)


def price(r: Resource, ctx: PricingContext) -> list[CostLine]:
    return [hourly_line("Public IPv4 addresses", 1, "addresses", platform_price(ctx, "Public IPv4 address"),
                        f"platform_prices.csv; {r.type} {r.name}")]
