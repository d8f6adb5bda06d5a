"""Issue 28 item 6 (cap4): platform costs outside us-east-1 from sourced regional rows (scripts/data/
platform_prices_extra.csv -> sizing/data/platform_prices.csv; sizing/data/cpu_instance_prices.csv). Each line is
priced from its own region's row (or an every-region `*` row), a line without one stays "not priced in <region>"
and is named in the warning, and the plan's platform total is the sum of the priced lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sizing.catalog.lookup import Catalog
from sizing.cost.money import cpu_price, platform_lines
from sizing.planning.planner import plan_stack
from sizing.stack import load_stack

STACKS = Path(__file__).resolve().parents[1] / "stacks"
CAT = Catalog()


def _plan(region: str) -> Any:
    return plan_stack(load_stack(STACKS / "Pulumi.dev.yaml", [f"region={region}"]), CAT)


def _line(plan: Any, start: str) -> Any:
    return _line_in(plan.cost_lines, start)


def _line_in(lines: list[Any], start: str) -> Any:
    return next(c for c in lines if c.name.startswith(start))


def _platform(plan: Any) -> list[Any]:
    return [c for c in plan.cost_lines if not c.name.startswith("GPU instances")]


def test_eu_west_1_prices_root_volumes_logs_and_nat_from_its_own_rows() -> None:
    plan = _plan("eu-west-1")
    ebs = _line(plan, "Node root volumes")
    assert ebs.usd_per_month == pytest.approx(0.088 * ebs.quantity, abs=0.01)  # EU-EBS:VolumeUsage.gp3
    assert CAT.platform_price("CloudWatch Logs ingestion (standard class)", "eu-west-1").usd == 0.57
    assert CAT.platform_price("CloudWatch Logs storage", "eu-west-1").region == "eu-west-1"
    assert CAT.platform_price("NAT gateway data processing", "eu-west-1").usd == 0.048
    logs = _line(plan, "EKS control-plane logs")
    assert logs.usd_per_month is not None and logs.usd_per_month > 0
    nat = _line(plan, "NAT gateways")
    assert nat.usd_per_month == pytest.approx(0.048 * 730 * nat.quantity, abs=0.01)


@pytest.mark.parametrize("region,gp3", [("eu-central-1", 0.0952), ("ap-northeast-2", 0.0912), ("sa-east-1", 0.152)])
def test_gp3_is_the_regions_own_rate(region: str, gp3: float) -> None:
    p = CAT.platform_price("EBS gp3 storage", region)
    assert p is not None and p.region == region and p.usd == gp3


@pytest.mark.parametrize("region", ["us-gov-east-1", "us-gov-west-1"])
def test_the_gov_regions_price_the_system_node_types(region: str) -> None:
    # Karpenter's generated on-demand table (zz_generated.pricing_aws_us_gov.go): m6i.large 0.121, m6i.xlarge 0.242
    assert (cpu_price(CAT, "m6i.large", region), cpu_price(CAT, "m6i.xlarge", region)) == (0.121, 0.242)
    lines = platform_lines(CAT, region, 10.0, 100.0, "m6i.xlarge", 2, 1, nodes_total=3)
    assert _line_in(lines, "System nodes").usd_per_month == pytest.approx(0.242 * 730 * 2, abs=0.01)
    assert _line_in(lines, "Node root volumes").usd_per_month is not None


@pytest.mark.parametrize("region", ["eu-west-1", "eu-central-1", "sa-east-1", "ap-south-2"])
def test_unpriced_lines_are_named_and_the_total_reconciles(region: str) -> None:
    plan = _plan(region)
    lines = _platform(plan)
    unpriced = [c.name for c in lines if c.usd_per_month is None]
    if unpriced:
        (w,) = [w for w in plan.warnings if w.startswith(f"platform not priced in {region}")]
        assert all(n in w for n in unpriced)
    else:
        assert not any("not priced" in w for w in plan.warnings)
    assert plan.totals.platform_usd_per_month == pytest.approx(
        sum(c.usd_per_month for c in lines if c.usd_per_month is not None), abs=0.05)


# skypilot-org/skypilot-catalog@27f67dd4 catalogs/v7/aws/vms.csv, `Price` (on-demand Linux USD/h) of m6i.large and
# m6i.xlarge: the system-node types priced in the 22 commercial regions that catalog lists them in.
SKYPILOT_M6I = {"af-south-1": (0.127, 0.254), "ap-east-1": (0.132, 0.264), "ap-northeast-1": (0.124, 0.248),
                "ap-northeast-2": (0.118, 0.236), "ap-northeast-3": (0.124, 0.248), "ap-south-1": (0.101, 0.202),
                "ap-southeast-1": (0.12, 0.24), "ap-southeast-2": (0.12, 0.24), "ap-southeast-3": (0.12, 0.24),
                "ca-central-1": (0.107, 0.214), "eu-central-1": (0.115, 0.23), "eu-north-1": (0.102, 0.204),
                "eu-south-1": (0.112, 0.224), "eu-west-1": (0.107, 0.214), "eu-west-2": (0.111, 0.222),
                "eu-west-3": (0.112, 0.224), "me-central-1": (0.1177, 0.2354), "me-south-1": (0.132, 0.264),
                "us-east-1": (0.096, 0.192), "us-east-2": (0.096, 0.192), "us-west-1": (0.112, 0.224),
                "us-west-2": (0.096, 0.192)}


@pytest.mark.parametrize("region", sorted(SKYPILOT_M6I))
def test_system_node_types_are_priced_from_the_regions_own_row(region: str) -> None:
    large, xlarge = SKYPILOT_M6I[region]
    assert (cpu_price(CAT, "m6i.large", region), cpu_price(CAT, "m6i.xlarge", region)) == (large, xlarge)
    c = CAT.cpu_instances[("m6i.xlarge", region, "on-demand")]
    assert c.source and c.as_of and (region == "us-east-1" or "skypilot-org/skypilot-catalog@27f67dd4" in c.source)


def test_eu_west_1_system_nodes_are_priced_and_the_total_adds_them() -> None:
    plan = _plan("eu-west-1")
    sysn = _line(plan, "System nodes")
    assert sysn.usd_per_month == pytest.approx(0.214 * 730 * sysn.quantity, abs=0.01)
    assert plan.totals.platform_usd_per_month == pytest.approx(
        sum(c.usd_per_month for c in _platform(plan) if c.usd_per_month is not None), abs=0.05)


@pytest.mark.parametrize("region,s3", [("sa-east-1", 0.0405), ("eu-west-1", 0.023)])
def test_s3_standard_is_the_regions_own_rate(region: str, s3: float) -> None:
    p = CAT.platform_price("S3 Standard storage, first 50 TB/month", region)
    assert p is not None and p.region == region and p.usd == s3 and p.source and p.as_of
    plan = _plan(region)
    s3_line = _line(plan, "Weights storage (S3 Standard)")
    assert s3_line.usd_per_month == pytest.approx(s3 * s3_line.quantity, abs=0.01)


def test_eu_west_1_prices_every_platform_line() -> None:
    plan = _plan("eu-west-1")
    assert [c.name for c in _platform(plan) if c.usd_per_month is None] == []
    assert not any("not priced" in w for w in plan.warnings)
