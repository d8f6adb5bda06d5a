"""EKS managed node groups: instances at desired size (min and max in the unit text), priced
from the GPU price table or, for CPU instances, cpu_instance_prices.csv; plus root volumes when
the node group sets `diskSize` (gp3)."""

from __future__ import annotations

from sizing.cost.resources.base import PricingContext, Resource, hourly_line, num, platform_price
from sizing.plan import CostLine

RESOURCE_TYPES = ("aws:eks/nodeGroup:NodeGroup",)
GB_PER_GIB = 2**30 / 1e9
PURCHASE_OF = {"SPOT": "spot", "CAPACITY_BLOCK": "capacity-block", "ON_DEMAND": "on-demand"}


def price(r: Resource, ctx: PricingContext) -> list[CostLine]:
    from sizing.cost.money import cpu_price

    types = r.inputs.get("instanceTypes") or []
    itype = str(types[0]) if types else ctx.group_instance_types.get(r.name, "unknown instance type")
    # a Capacity Block is billed at its block rate; an ODCR (ON_DEMAND with a reservation) at on-demand
    purchase = PURCHASE_OF.get(str(r.inputs.get("capacityType", "ON_DEMAND")).upper(), "on-demand")
    sc = r.inputs.get("scalingConfig") or {}
    desired = num(sc.get("desiredSize"), num(sc.get("minSize")))
    lo, hi = num(sc.get("minSize")), num(sc.get("maxSize"))
    is_gpu = itype in ctx.catalog.instances and ctx.catalog.instances[itype].gpu_count > 0
    if is_gpu:
        p = ctx.catalog.price(itype, ctx.region, purchase)
        usd_h, src, kind = (p.usd_per_hour if p else None), "prices.csv", "GPU instances"
    else:
        usd_h = cpu_price(ctx.catalog, itype, ctx.region) if purchase == "on-demand" else None
        src, kind = "cpu_instance_prices.csv", "System nodes" if "system" in r.name else "CPU instances"
    scale = f" (min {lo:g}, max {hi:g})" if lo is not None and hi is not None else ""
    lines = [hourly_line(f"{kind} ({purchase}, {itype})", desired if desired is not None else 0,
                         f"instances{scale}", usd_h if desired is not None else None,
                         f"{src}; {r.type} {r.name}")]
    disk = num(r.inputs.get("diskSize"))
    if disk is not None:
        gb = round(disk * GB_PER_GIB * (desired or 0), 1)
        gp3 = platform_price(ctx, "EBS gp3 storage")
        lines.append(CostLine(name="Node root volumes (EBS gp3)", quantity=gb, unit="GB",
                              usd_per_month=None if gp3 is None or desired is None else round(gp3 * gb, 2),
                              source=f"platform_prices.csv; {r.type} {r.name}"))
    return lines
