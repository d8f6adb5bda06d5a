"""One pricing truth (issue 15 step 3): for every bundled stack, the plan's cost lines (sizing/cost/money.py
platform_lines and the GPU lines) reconcile with the resource-level pricing (sizing/cost/resources) of the
program `llmcap render` builds from that plan: the same quantity and the same $/month for every line both
price, and the lines only one side can price are named here with the reason."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from sizing.catalog.lookup import load_catalog
from sizing.cost.resources import load_resources, price_resources
from sizing.cost.resources.base import PricingContext
from sizing.plan import CostLine
from tests import pulumi_harness as h

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# plan line -> the resource lines that bill the same thing (names without the per-resource suffix)
SAME_THING = {
    "EKS control plane": "EKS control plane",
    "NAT gateways": "NAT gateways",
    "Public IPv4 addresses (NAT gateways)": "Public IPv4 addresses",
    "Node root volumes (EBS gp3)": "Node root volumes (EBS gp3)",
}
# priced by the plan, usage-based in the program (a preview cannot know the bytes): the resource is there,
# not priced, and the plan's quantity is its own estimate
USAGE_BASED = {
    "Weights storage (S3 Standard)": "S3 bucket (",  # GB stored: the plan knows the checkpoint size
    "EKS control-plane logs": "CloudWatch log group (",  # GB ingested: the plan's estimate (platform.csv)
}
# in the program, in neither the plan nor the catalog's prices (the plan's all-in cost excludes them)
NOT_IN_PLAN = {
    "aws:kms/key:Key": "a customer-managed KMS key (secrets encryption) bills $1/month; no catalog price yet",
    "Load balancer (network,": "the router's NLB (a Service of type LoadBalancer): no catalog price yet",
    "aws:ecr/pullThroughCacheRule:PullThroughCacheRule": "no charge of its own; cached images bill as ECR storage",
    "NAT gateway data processing": "per GB processed: usage-based",
}


def _resource_lines(stack_id: str, tmp_path: Path) -> tuple[list[CostLine], list[CostLine]]:
    result = h.bundled(stack_id)
    render = pytest.importorskip("infra.render")
    p = tmp_path / "resources.json"
    p.write_text(json.dumps(render.resources_document(result)))
    lines = price_resources(load_resources(p), PricingContext(load_catalog(), result.plan.region))
    return list(result.plan.cost_lines), lines


@pytest.mark.parametrize("stack_id", h.BUNDLED_STACKS)
def test_plan_lines_reconcile_with_the_rendered_program(stack_id: str, tmp_path: Path) -> None:
    plan_lines, res_lines = _resource_lines(stack_id, tmp_path)
    by: dict[str, list[CostLine]] = defaultdict(list)
    for ln in res_lines:
        by[ln.name].append(ln)
    # pools of one instance type and purchase (a dedicated layout's class pools) are one bill line: the plan
    # keeps a line per pool, the program a line per node group; compare their sums
    merged: dict[str, CostLine] = {}
    for pl in plan_lines:
        if pl.name in merged and pl.name.startswith("GPU instances"):
            m = merged[pl.name]
            usd = None if m.usd_per_month is None or pl.usd_per_month is None else m.usd_per_month + pl.usd_per_month
            merged[pl.name] = m.model_copy(update={"quantity": m.quantity + pl.quantity, "usd_per_month": usd})
        else:
            merged.setdefault(pl.name, pl)
    plan_lines = list(merged.values())
    used: set[int] = set()

    def total(lines: list[CostLine]) -> tuple[float, float | None]:
        usd = [ln.usd_per_month for ln in lines]
        return sum(ln.quantity for ln in lines), None if any(u is None for u in usd) else sum(u or 0 for u in usd)

    for pl in plan_lines:
        name = pl.name
        if name.startswith(("GPU instances", "System nodes")) or name in SAME_THING:
            lines = by[SAME_THING.get(name, name)]
            assert lines, f"{stack_id}: the program prices nothing as {name!r}"
            qty, usd = total(lines)
            assert qty == pytest.approx(pl.quantity, abs=0.05 * (len(lines) + 1) + 1e-9), f"{stack_id}: {name} quantity"
            assert pl.usd_per_month is not None and usd is not None, f"{stack_id}: {name} not priced"
            # each side rounds its lines to cents (and GB to 0.1): a cent per line, and 0.1 GB per line
            assert usd == pytest.approx(pl.usd_per_month, abs=0.01 * len(lines) + 0.01), f"{stack_id}: {name} $"
            used.update(id(ln) for ln in lines)
            continue
        prefix = next((v for k, v in USAGE_BASED.items() if name.startswith(k)), None)
        assert prefix is not None, f"{stack_id}: plan line {name!r} has no counterpart in the program"
        lines = [ln for ln in res_lines if ln.name.startswith(prefix)]
        assert lines and all(ln.usd_per_month is None for ln in lines), f"{stack_id}: {name} vs {prefix}"
        used.update(id(ln) for ln in lines)
    left = [ln for ln in res_lines if id(ln) not in used]
    unexplained = [ln.name for ln in left if not any(ln.name.startswith(k) for k in NOT_IN_PLAN)]
    assert not unexplained, f"{stack_id}: the program bills what the plan does not show: {unexplained}"
    assert all(ln.usd_per_month is None for ln in left), f"{stack_id}: priced in the program, not in the plan"


def test_plan_total_is_the_program_total_of_what_both_price(tmp_path: Path) -> None:
    plan_lines, res_lines = _resource_lines("dev", tmp_path)
    plan_usd = sum(ln.usd_per_month or 0 for ln in plan_lines if not ln.name.startswith(tuple(USAGE_BASED)))
    res_usd = sum(ln.usd_per_month or 0 for ln in res_lines)
    assert res_usd == pytest.approx(plan_usd, abs=0.1)
