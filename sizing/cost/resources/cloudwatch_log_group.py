"""CloudWatch log groups: billed per GB ingested and per GB-month stored, which a preview cannot know,
so a log group is a usage-based line (not priced) that names its retention. The plan's "EKS control-plane
logs" line prices the estimated volume of the EKS cluster's log group (platform.csv rows)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sizing.cost.resources.base import num
from sizing.plan import CostLine

if TYPE_CHECKING:
    from sizing.cost.resources.base import PricingContext, Resource

RESOURCE_TYPES = ("aws:cloudwatch/logGroup:LogGroup",)


def price(r: Resource, ctx: PricingContext) -> list[CostLine]:
    days = num(r.inputs.get("retentionInDays"))
    kept = f"{days:g}-day retention" if days else "kept forever (no retentionInDays)"
    return [CostLine(name=f"CloudWatch log group ({r.name})", quantity=0, unit="GB (usage-based)", usd_per_month=None,
                     source=f"usage-based: CloudWatch Logs per GB ingested and per GB-month stored, {kept}; "
                            "see the plan's EKS control-plane logs line")]
