"""Preflight knows capacity (issue 28): each reservation or Capacity Block of the plan checked against
DescribeCapacityReservations (botocore Stubber: moto does not implement it), one line per problem, and
one line per on-demand pool saying its capacity is not guaranteed and how to reserve it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from sizing.adapters.aws import AwsClients, capacity_checks, run_preflight
from sizing.catalog.lookup import Catalog
from tests.aws_support import QUOTAS, add_quota_pages, set_dummy_aws_env, stub_client
from tests.plan_factory import make_plan, make_pool

BLOCK = "cr-0a1b2c3d4e5f60718"
NOW = datetime(2026, 12, 20, tzinfo=UTC)


def _block_pool(**kw: object):  # type: ignore[no-untyped-def]
    p = make_pool(name="p5-48xlarge-cb", instance_type="p5.48xlarge", gpu="H100-SXM", gpus_per_instance=8,
                  replicas=2, replicas_per_instance=1, instances_min=2, instances_desired=2, instances_max=2,
                  purchase="capacity-block", usd_per_instance_hour=39.33, local_nvme_gb=30400)
    return p.model_copy(update={"capacity_reservation_id": BLOCK, "availability_zone_id": "use1-az6",
                                "capacity_ends": "2027-01-14", **kw})


def _reservation(**kw: object) -> dict[str, object]:
    return {"CapacityReservationId": BLOCK, "InstanceType": "p5.48xlarge", "AvailabilityZoneId": "use1-az6",
            "AvailabilityZone": "us-east-1f", "TotalInstanceCount": 2, "AvailableInstanceCount": 2,
            "State": "active", "ReservationType": "capacity-block",
            "StartDate": datetime(2026, 12, 14, 11, 30, tzinfo=UTC),
            "EndDate": datetime(2027, 1, 14, 11, 30, tzinfo=UTC), **kw}


def _checks(found: dict[str, object] | None) -> list:  # type: ignore[type-arg]
    ec2, stub = stub_client("ec2", "us-east-1")
    if found is None:
        stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound",
                              expected_params={"CapacityReservationIds": [BLOCK]})
    else:
        stub.add_response("describe_capacity_reservations", {"CapacityReservations": [found]},
                          {"CapacityReservationIds": [BLOCK]})
    with stub:
        out = capacity_checks(ec2, make_plan([_block_pool()]), "us-east-1", now=NOW)
    stub.assert_no_pending_responses()
    return out


@pytest.mark.parametrize(("found", "line"), [
    (_reservation(State="expired", EndDate=datetime(2026, 12, 1, 11, 30, tzinfo=UTC)),
     f"p5-48xlarge-cb: capacity block {BLOCK} is expired (ended 2026-12-01): the pool would get no capacity"),
    (_reservation(AvailabilityZoneId="use1-az2"),
     f"p5-48xlarge-cb: capacity block {BLOCK} is in use1-az2, the stack says use1-az6"),
    (_reservation(TotalInstanceCount=1),
     f"p5-48xlarge-cb: capacity block {BLOCK} holds 1 × p5.48xlarge, the pool needs 2"),
    (None, f"p5-48xlarge-cb: capacity block {BLOCK} not found in use1-az6"),
])
def test_a_bad_reservation_is_one_failing_line(found: dict[str, object] | None, line: str) -> None:
    (c,) = _checks(found)
    assert c.check == "capacity" and c.status == "fail"
    assert c.detail.startswith(line), c.detail
    assert "\n" not in c.detail


def test_a_good_block_passes_with_the_time_left() -> None:
    (c,) = _checks(_reservation())
    assert c.status == "pass" and c.offered_azs == ["use1-az6"]
    assert "active, 2 × p5.48xlarge in use1-az6, 25.5 days left (ends 2027-01-14)" in c.detail


def test_preflight_end_to_end_reports_each_problem_once_and_leaves_the_cache(monkeypatch: pytest.MonkeyPatch,
                                                                              tmp_path: Path) -> None:
    set_dummy_aws_env(monkeypatch, tmp_path, None)
    cache = tmp_path / "cache" / "llmcap" / "catalog"
    cache.mkdir(parents=True)
    (cache / "prices.csv").write_text("instance_type,region,purchase,usd_per_hour,source,as_of\n")
    before = {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()}
    od = make_pool(name="p5-48xlarge", instance_type="p5.48xlarge", gpu="H100-SXM", gpus_per_instance=8,
                   replicas=2, replicas_per_instance=1, instances_min=2, instances_desired=2, instances_max=3,
                   usd_per_instance_hour=55.04, local_nvme_gb=30400)
    plan = make_plan([_block_pool(), od])
    ec2, stub = stub_client("ec2", "us-east-1")
    stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": [
        {"InstanceType": "p5.48xlarge", "LocationType": "availability-zone-id", "Location": "use1-az6"}]})
    stub.add_response("describe_capacity_reservations",
                      {"CapacityReservations": [_reservation(State="expired")]}, {"CapacityReservationIds": [BLOCK]})
    sq, qstub = stub_client("service-quotas", "us-east-1")
    add_quota_pages(qstub, QUOTAS, None)
    with stub, qstub:
        report = run_preflight(plan, "us-east-1", AwsClients(injected={"ec2": ec2, "service-quotas": sq}), Catalog())
    cap = [c for c in report.checks if c.check == "capacity"]
    assert [c.status for c in cap] == ["fail", "info"]
    assert f"capacity block {BLOCK} is expired" in cap[0].detail
    assert cap[1].detail == (
        "p5-48xlarge: on-demand p5.48xlarge capacity is not guaranteed (no reservation in llmcap:hardware.capacity); "
        "to hold it: aws ec2 describe-capacity-block-offerings --instance-type p5.48xlarge --instance-count 3 "
        "--capacity-duration-hours 24 --region us-east-1, then aws ec2 purchase-capacity-block "
        "--capacity-block-offering-id <id> --instance-platform Linux/UNIX")
    # the block's instances are not on-demand instances: only the on-demand pool counts toward the P quota
    (quota,) = [c for c in report.checks if c.check == "quota"]
    assert quota.required_vcpus == 3 * 192
    assert not report.ok
    assert {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()} == before


# --- Savings Plans rates in `llmcap catalog refresh --savings-plans` ----------------------------

def _sp_result(t: str, years: int, rate: str, usage: str = "BoxUsage") -> dict[str, object]:
    return {"savingsPlanOffering": {"offeringId": f"o-{t}-{years}", "paymentOption": "No Upfront",
                                    "planType": "Compute", "durationSeconds": 31_536_000 * years, "currency": "USD"},
            "rate": rate, "unit": "Hrs", "productType": "EC2", "serviceCode": "AmazonEC2",
            "usageType": f"{usage}:{t}", "operation": "RunInstances",
            "properties": [{"name": "instanceType", "value": t}, {"name": "region", "value": "us-east-1"}]}


def test_savings_plan_rates_are_read_per_term_across_pages() -> None:
    from sizing.adapters.aws import fetch_savings_plan_rates

    sp, stub = stub_client("savingsplans", "us-east-1")
    stub.add_response("describe_savings_plans_offering_rates", {
        "searchResults": [_sp_result("p5.48xlarge", 1, "38.53"), _sp_result("p5.48xlarge", 1, "9.9", "HostUsage")],
        "nextToken": "t2"})
    stub.add_response("describe_savings_plans_offering_rates", {
        "searchResults": [_sp_result("p5.48xlarge", 3, "27.52"), _sp_result("g6e.xlarge", 1, "1.2")]})
    with stub:
        got = fetch_savings_plan_rates(sp, ["p5.48xlarge"], "us-east-1")
    stub.assert_no_pending_responses()
    assert got == {("p5.48xlarge", "savings-plan-1yr"): 38.53, ("p5.48xlarge", "savings-plan-3yr"): 27.52}


def test_an_unreadable_savings_plan_rate_is_one_error() -> None:
    from sizing.adapters.aws import AwsDataError, fetch_savings_plan_rates

    sp, stub = stub_client("savingsplans", "us-east-1")
    stub.add_response("describe_savings_plans_offering_rates",
                      {"searchResults": [_sp_result("p5.48xlarge", 1, "n/a")]})
    with stub, pytest.raises(AwsDataError) as e:
        fetch_savings_plan_rates(sp, ["p5.48xlarge"], "us-east-1")
    assert "savings-plan-1yr rate of p5.48xlarge is unreadable" in e.value.problems[0]


def test_refresh_with_savings_plans_writes_them_and_keeps_the_bundled_reserved_rows(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import csv

    from sizing.adapters.aws import SAVINGS_PLAN_SOURCE, refresh_catalog
    from tests.aws_faults import ec2_client, pricing_client

    set_dummy_aws_env(monkeypatch, tmp_path, None)
    sp, stub = stub_client("savingsplans", "us-east-1")
    stub.add_response("describe_savings_plans_offering_rates",
                      {"searchResults": [_sp_result("p5.48xlarge", 1, "38.53"), _sp_result("p5.48xlarge", 3, "27.52")]})
    out = tmp_path / "catalog"
    clients = AwsClients(injected={"ec2": ec2_client(), "pricing": pricing_client(), "savingsplans": sp})
    with stub:
        refresh_catalog(["us-east-1"], out, clients, Catalog(), savings_plans=True)
    with (out / "prices.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["region"] == "us-east-1"]
    sp_rows = {(r["instance_type"], r["purchase"]): float(r["usd_per_hour"]) for r in rows
               if r["purchase"].startswith("savings-plan") and r["source"] == SAVINGS_PLAN_SOURCE}
    assert sp_rows == {("p5.48xlarge", "savings-plan-1yr"): 38.53, ("p5.48xlarge", "savings-plan-3yr"): 27.52}
    assert any(r["purchase"] == "reserved-1yr" for r in rows) and any(r["purchase"] == "capacity-block" for r in rows)
    # the plan then prices the block stack's "rest" at the Savings Plan rate it asked for
    from sizing.planning.planner import plan_stack
    from sizing.stack import load_stack
    from tests.k8s_support import ROOT

    plan = plan_stack(load_stack(ROOT / "stacks" / "Pulumi.llama70b-block.yaml"), Catalog(out))
    rest = [p for p in plan.pools if p.purchase == "on-demand"]
    assert rest and all((p.usd_per_instance_hour, p.rate_basis) == (38.53, "savings-plan-1yr") for p in rest)
    opts = {o.option: o for o in plan.purchase_options}
    assert opts["savings-plan-3yr"].usd_per_month is not None and opts["savings-plan-3yr"].source == SAVINGS_PLAN_SOURCE


# --- Capacity Block rates in `llmcap catalog refresh --capacity-block TYPE` ---------------------

def _offering(fee: str, count: int = 1, hours: int = 24, az: str = "us-east-1a") -> dict[str, object]:
    return {"CapacityBlockOfferingId": f"cbo-{fee.replace('.', '')}", "InstanceType": "p5.48xlarge",
            "AvailabilityZone": az, "InstanceCount": count, "CapacityBlockDurationHours": hours,
            "StartDate": datetime(2026, 12, 22, 11, 30, tzinfo=UTC),
            "EndDate": datetime(2026, 12, 23, 11, 30, tzinfo=UTC),
            "UpfrontFee": fee, "CurrencyCode": "USD", "Tenancy": "default"}


def test_capacity_block_rate_is_the_cheapest_offering_per_instance_hour() -> None:
    from sizing.adapters.aws import fetch_capacity_block_rates

    ec2, stub = stub_client("ec2", "us-east-1")
    params = {"InstanceType": "p5.48xlarge", "InstanceCount": 1, "CapacityDurationHours": 24}
    stub.add_response("describe_capacity_block_offerings",
                      {"CapacityBlockOfferings": [_offering("1000.08")], "NextToken": "n"}, params)
    stub.add_response("describe_capacity_block_offerings",
                      {"CapacityBlockOfferings": [_offering("1920.0", count=2, hours=24, az="us-east-1f")]},
                      {**params, "NextToken": "n"})
    with stub:
        got = fetch_capacity_block_rates(ec2, ["p5.48xlarge"], "us-east-1")
    stub.assert_no_pending_responses()
    assert got == {"p5.48xlarge": (40.0, "us-east-1f, starting 2026-12-22")}


def test_an_offering_without_a_fee_is_one_error() -> None:
    from sizing.adapters.aws import AwsDataError, fetch_capacity_block_rates

    ec2, stub = stub_client("ec2", "us-east-1")
    bad = _offering("1000")
    bad.pop("UpfrontFee")
    stub.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [bad]})
    with stub, pytest.raises(AwsDataError) as e:
        fetch_capacity_block_rates(ec2, ["p5.48xlarge"], "us-east-1")
    assert "an offering of p5.48xlarge has no usable UpfrontFee" in e.value.problems[0]


def test_refresh_with_a_capacity_block_type_replaces_only_its_block_rate(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    import csv

    from sizing.adapters.aws import refresh_catalog
    from tests.aws_faults import ec2_client, pricing_client

    set_dummy_aws_env(monkeypatch, tmp_path, None)
    calls: list[dict[str, object]] = []

    def offerings(params: dict[str, object], **_: object) -> tuple[object, dict[str, object]]:
        from botocore.awsrequest import AWSResponse

        calls.append(params)  # moto has no DescribeCapacityBlockOfferings: answer before the call is sent
        return (AWSResponse("https://ec2.us-east-1.amazonaws.com", 200, {}, None),
                {"CapacityBlockOfferings": [_offering("960.0")]})

    out = tmp_path / "catalog"
    ec2 = ec2_client({"before-call.ec2.DescribeCapacityBlockOfferings": offerings})
    refresh_catalog(["us-east-1"], out, AwsClients(injected={"ec2": ec2, "pricing": pricing_client()}), Catalog(),
                    capacity_blocks=("p5.48xlarge",))
    with (out / "prices.csv").open(newline="") as f:
        blocks = [r for r in csv.DictReader(f) if r["purchase"] == "capacity-block"]
    assert [(r["instance_type"], r["region"], float(r["usd_per_hour"])) for r in blocks] == \
        [("p5.48xlarge", "us-east-1", 40.0)]
    assert blocks[0]["source"].startswith("AWS EC2 DescribeCapacityBlockOfferings") and len(calls) == 1
