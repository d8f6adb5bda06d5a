"""EKS control plane: one cluster-hour per hour (standard support)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sizing.cost.resources.base import PricingContext, Resource, hourly_line, platform_price

if TYPE_CHECKING:
    from sizing.plan import CostLine

RESOURCE_TYPES = ("aws:eks/cluster:Cluster",)


def price(r: Resource, ctx: PricingContext) -> list[CostLine]:
    return [hourly_line("EKS control plane", 1, "cluster", platform_price(ctx, "EKS control plane (standard support)"),
                        f"platform_prices.csv; {r.type} {r.name}")]
