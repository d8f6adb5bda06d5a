"""Preflight: offerings from a moto server (including a region that lacks the planned type),
vCPU quotas by name from a stubbed Service Quotas client, spot history from a stubbed EC2 client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sizing.adapters.aws import (
    AwsAccessError,
    AwsClients,
    SpotAz,
    aws_errors,
    fetch_offerings,
    fetch_spot_prices,
    fetch_vcpu_quotas,
    preflight_warnings,
    quota_name_for,
    run_preflight,
)
from sizing.catalog.lookup import Catalog
from tests.aws_support import QUOTAS, add_quota_pages, moto_url, set_dummy_aws_env, stub_client
from tests.plan_factory import make_plan, make_pool

G_OD, P_OD = "Running On-Demand G and VT instances", "Running On-Demand P instances"


@pytest.fixture()
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    url = moto_url()
    set_dummy_aws_env(monkeypatch, tmp_path, url)
    return url


def _quota_clients(url: str, region: str, applied: list[dict[str, object]],
                   defaults: list[dict[str, object]] | None = None) -> tuple[AwsClients, object]:
    sq, stub = stub_client("service-quotas", region)
    add_quota_pages(stub, applied, defaults)
    return AwsClients(endpoint_url=url, injected={"service-quotas": sq}), stub


def test_quota_families_map_instance_families_to_quota_names() -> None:
    assert quota_name_for("g6e", "on-demand") == G_OD
    assert quota_name_for("gr6", "spot") == "All G and VT Spot Instance Requests"
    assert quota_name_for("p6-b200", "on-demand") == P_OD
    assert quota_name_for("p5", "spot") == "All P Spot Instance Requests"
    assert quota_name_for("m7i", "on-demand") is None


def test_offerings_from_moto_include_a_region_without_the_type(aws_env: str) -> None:
    clients = AwsClients(endpoint_url=aws_env)
    east = fetch_offerings(clients.ec2("us-east-1"), ["g6.12xlarge"])
    west = fetch_offerings(clients.ec2("eu-west-1"), ["g6.12xlarge", "g5.xlarge"])
    assert east["g6.12xlarge"] and all(az.startswith("use1-az") for az in east["g6.12xlarge"])
    assert west["g6.12xlarge"] == [] and west["g5.xlarge"]


def test_quota_pass_and_fail_summed_per_quota_with_the_exact_increase_command(aws_env: str) -> None:
    # two G pools share one quota: 3 × 48 + 2 × 48 = 240 vCPUs > 64; P pool: 1 × 96 > 0
    plan = make_plan([make_pool(), make_pool(name="g5", instance_type="g5.12xlarge", gpu="A10G", instances_max=2),
                      make_pool(name="p4d", instance_type="p4d.24xlarge", gpu="A100-40GB", gpus_per_instance=8,
                                instances_max=1)])
    clients, stub = _quota_clients(aws_env, "us-east-1", QUOTAS)
    with stub:  # type: ignore[attr-defined]
        report = run_preflight(plan, "us-east-1", clients, Catalog())
    quota = {c.quota_name: c for c in report.checks if c.check == "quota"}
    g = quota[G_OD]
    assert (g.status, g.required_vcpus, g.quota_vcpus, g.quota_code) == ("fail", 240, 64.0, "L-DB2E81BA")
    assert g.instance_type == "g5.12xlarge, g6.12xlarge"
    assert g.fix == ("aws service-quotas request-service-quota-increase --service-code ec2 "
                     "--quota-code L-DB2E81BA --desired-value 240 --region us-east-1")
    assert quota[P_OD].status == "fail" and quota[P_OD].required_vcpus == 96
    assert not report.ok
    offered = [c for c in report.checks if c.check == "offered"]
    assert {c.instance_type for c in offered} == {"g5.12xlarge", "g6.12xlarge", "p4d.24xlarge"}
    assert all(c.status == "pass" and c.offered_azs for c in offered)


def test_quota_within_limit_passes_and_defaults_fill_unlisted_quotas(aws_env: str) -> None:
    plan = make_plan([make_pool(instances_max=1, purchase="spot")])  # 48 vCPUs of spot G
    applied = [q for q in QUOTAS if q["QuotaName"] != "All G and VT Spot Instance Requests"]
    defaults = [{"QuotaName": "All G and VT Spot Instance Requests", "QuotaCode": "L-3819A6DF", "Value": 64.0}]
    clients, stub = _quota_clients(aws_env, "us-east-1", applied, defaults)
    with stub:  # type: ignore[attr-defined]
        report = run_preflight(plan, "us-east-1", clients, Catalog())
    (q,) = [c for c in report.checks if c.check == "quota"]
    assert (q.status, q.required_vcpus, q.quota_code, q.fix) == ("pass", 48, "L-3819A6DF", None)
    assert "AWS default" in q.detail
    assert report.ok


def test_not_offered_region_fails_and_names_regions_that_offer_it(aws_env: str) -> None:
    plan = make_plan([make_pool(instances_max=1)])
    clients, stub = _quota_clients(aws_env, "eu-west-1", QUOTAS)
    with stub:  # type: ignore[attr-defined]
        report = run_preflight(plan, "eu-west-1", clients, Catalog())
    (off,) = [c for c in report.checks if c.check == "offered"]
    assert off.status == "fail" and off.offered_azs == []
    assert "not offered in eu-west-1" in off.detail and "us-east-1" in off.detail
    assert not report.ok
    assert report.to_json()["checks"][0].keys() >= {"check", "instance_type", "offered_azs", "status", "detail"}


def test_quota_missing_from_the_api_is_unknown_not_pass(aws_env: str) -> None:
    plan = make_plan([make_pool(instances_max=1)])
    clients, stub = _quota_clients(aws_env, "us-east-1", [q for q in QUOTAS if q["QuotaName"] != G_OD], [])
    with stub:  # type: ignore[attr-defined]
        report = run_preflight(plan, "us-east-1", clients, Catalog())
    (q,) = [c for c in report.checks if c.check == "quota"]
    assert q.status == "unknown" and "not found" in q.detail and not report.ok


def test_access_denied_is_one_line() -> None:
    sq, stub = stub_client("service-quotas", "us-east-1")
    stub.add_client_error("list_service_quotas", service_error_code="AccessDeniedException",
                          service_message="User is not authorized to perform servicequotas:ListServiceQuotas",
                          http_status_code=403)
    with stub, pytest.raises(AwsAccessError) as e, aws_errors():
        fetch_vcpu_quotas(sq, {G_OD})
    (line,) = e.value.problems
    assert "access denied" in line and "ListServiceQuotas" in line and "\n" not in line


def test_preflight_warnings_turn_failures_and_access_problems_into_lines(
        aws_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = make_plan([make_pool(instances_max=3)])
    clients, stub = _quota_clients(aws_env, "us-east-1", QUOTAS)
    with stub:  # type: ignore[attr-defined]
        lines = preflight_warnings(plan, "us-east-1", clients, Catalog())
    assert len(lines) == 1 and "--quota-code L-DB2E81BA --desired-value 144" in lines[0]
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    lines = preflight_warnings(plan, "us-east-1", AwsClients(endpoint_url=aws_env), Catalog())
    assert lines == [lines[0]] and lines[0].startswith("preflight skipped: no AWS credentials found")


def test_spot_price_is_the_time_weighted_median_per_regular_az_over_7_days() -> None:
    ec2, stub = stub_client("ec2", "us-east-1")
    now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    start = now - timedelta(days=7)

    def h(az: str, usd: str, ts: datetime) -> dict[str, object]:
        return {"AvailabilityZone": az, "InstanceType": "g6.12xlarge", "ProductDescription": "Linux/UNIX",
                "SpotPrice": usd, "Timestamp": ts}

    params = {"InstanceTypes": ["g6.12xlarge"], "ProductDescriptions": ["Linux/UNIX"], "StartTime": start,
              "EndTime": now}
    # 1a: 1.90 in effect at the window's start for 5 days, then 2.10 for 2 days -> median 1.90
    stub.add_response("describe_spot_price_history", {
        "SpotPriceHistory": [h("us-east-1a", "2.10", now - timedelta(days=2)),
                             h("us-east-1a", "1.90", start - timedelta(hours=1)),
                             h("us-east-1b", "2.00", start - timedelta(days=1))],
        "NextToken": "n1"}, params)
    stub.add_response("describe_spot_price_history", {
        "SpotPriceHistory": [h("us-east-1-atl-2a", "0.50", now), h("us-east-1c", "2.40", now - timedelta(days=1))]},
        {**params, "NextToken": "n1"})
    with stub:
        got = fetch_spot_prices(ec2, ["g6.12xlarge"], "us-east-1", now=now)
    assert got == {"g6.12xlarge": {"us-east-1a": SpotAz(1.90, 2), "us-east-1b": SpotAz(2.00, 1),
                                   "us-east-1c": SpotAz(2.40, 1)}}  # the Local Zone is left out
