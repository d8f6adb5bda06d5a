"""S3 buckets: storage is billed by the GB stored, which a preview cannot know, so the bucket is
a usage-based line (not priced). The plan's "Weights storage" line prices the model weights."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sizing.plan import CostLine

if TYPE_CHECKING:
    from sizing.cost.resources.base import PricingContext, Resource

RESOURCE_TYPES = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")


def price(r: Resource, ctx: PricingContext) -> list[CostLine]:
    return [CostLine(name=f"S3 bucket ({r.name})", quantity=0, unit="GB (usage-based)", usd_per_month=None,
                     source="usage-based: S3 Standard per GB-month stored; see the plan's weights storage line")]
