"""Launch templates: no charge of their own, but the EBS volumes they declare are billed per node
that uses them. The node count lives on the node group, which refers to the template by an id a
preview cannot resolve, so the volumes show as not priced (the plan's "Node root volumes" line
prices them from the plan's node count)."""

from __future__ import annotations

from sizing.cost.resources.base import PricingContext, Resource, num
from sizing.plan import CostLine

RESOURCE_TYPES = ("aws:ec2/launchTemplate:LaunchTemplate",)
GB_PER_GIB = 2**30 / 1e9


def price(r: Resource, ctx: PricingContext) -> list[CostLine]:
    sizes = [num((m.get("ebs") or {}).get("volumeSize")) for m in r.inputs.get("blockDeviceMappings") or []
             if isinstance(m, dict)]
    gib = sum(s for s in sizes if s is not None)
    if not sizes:
        return []
    return [CostLine(name=f"Node volumes (launch template {r.name})", quantity=round(gib * GB_PER_GIB, 1),
                     unit="GB per node", usd_per_month=None,
                     source="billed per node; node count is on the node group (see the plan's root volume line)")]
