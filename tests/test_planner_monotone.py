"""Allowing more hardware never makes a plan dearer: the unrestricted plan costs at most what the same stack
restricted to any one of its allowed instance types costs.

Defect: the planner tunes the batching flags of the cheapest candidate of each GPU type on default flags
only; at 1,000 users (prod) the H100's cheapest on default flags was TP4 on p5.48xlarge ($120,538/month),
while TP1 on p5.4xlarge, $145,650 on default flags, is $40,179 tuned: the plan went to 54 L40S at $73,361,
and restricting the stack to p5.4xlarge made it cheaper."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("instance_type", ["p5.4xlarge", "g6e.xlarge"])
def test_prod_is_never_dearer_than_a_restriction(instance_type: str) -> None:
    from sizing.planning.planner import plan_for

    stack = ROOT / "stacks" / "Pulumi.prod.yaml"
    free = plan_for(stack)
    only = plan_for(stack, [f"hardware.instance_types=[{instance_type}]"])
    assert free.totals.usd_per_month <= only.totals.usd_per_month + 1e-6, (
        free.pools[0].instance_type, free.totals.usd_per_month, instance_type, only.totals.usd_per_month)
