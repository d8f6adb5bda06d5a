"""Load balancers (an aws:lb resource, or a Kubernetes Service of type LoadBalancer, which makes
one). The catalog holds no load-balancer price yet, so they show as not priced."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sizing.cost.resources.base import PricingContext, Resource, hourly_line, platform_price

if TYPE_CHECKING:
    from sizing.plan import CostLine

RESOURCE_TYPES = ("aws:lb/loadBalancer:LoadBalancer", "aws:alb/loadBalancer:LoadBalancer",
                  "kubernetes:core/v1:Service")


def price(r: Resource, ctx: PricingContext) -> list[CostLine]:
    if r.type == "kubernetes:core/v1:Service" and (r.inputs.get("spec") or {}).get("type") != "LoadBalancer":
        return []
    kind = "network" if r.type.startswith("kubernetes") else str(r.inputs.get("loadBalancerType") or "application")
    item = "Network Load Balancer hourly" if kind == "network" else "Application Load Balancer hourly"
    usd_h = platform_price(ctx, item)
    where = f"platform_prices.csv ({item})" if usd_h is not None else f"no '{item}' price in the catalog"
    return [hourly_line(f"Load balancer ({kind}, {r.name})", 1, "load balancers", usd_h, f"{where}; {r.type} {r.name}")]
