"""Platform costs in every region (issue 28 item 6): the bundled every-region rows (EKS control plane, public
IPv4) and regional rows price a plan outside us-east-1, and `llmcap catalog refresh --platform` reads the rest
from the AWS Price List (Stubber answers checked against the real Pricing service model), so the same plan then
prices every platform line, each from the rate AWS lists for that region."""

from __future__ import annotations

import csv
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sizing.adapters.aws import (
    PLATFORM_QUERIES,
    AwsClients,
    PlatformQuery,
    platform_usd_from_price_list,
    pricing_filters,
    refresh_catalog,
)
from sizing.catalog.lookup import Catalog
from sizing.catalog.paths import BUNDLED_DIR
from sizing.planning.planner import plan_stack
from sizing.stack import load_stack
from tests.aws_faults import kept_types
from tests.aws_support import moto_url, price_list_entry, set_dummy_aws_env, stub_client

STACKS = Path(__file__).resolve().parents[1] / "stacks"
REGION = "eu-west-1"
# what the stubbed Price List answers for eu-west-1: distinct from every bundled us-east-1 rate, so a line
# priced from the wrong region's row cannot pass
EU_RATES = {
    "EKS control plane (standard support)": 0.1,
    "NAT gateway hourly": 0.048,
    "Public IPv4 address": 0.005,
    "EBS gp3 storage": 0.088,
    "S3 Standard storage, first 50 TB/month": 0.024,
    "CloudWatch Logs ingestion (standard class)": 0.57,
    "CloudWatch Logs storage": 0.0315,
}
EU_CPU = {"m6i.large": 0.107, "m6i.xlarge": 0.214}
PREFIX = "EU"  # eu-west-1's billing prefix in usage types


def product(service: str, usagetype: str, usd: float, operation: str = "", begin: str = "0",
            more_tiers: tuple[tuple[str, float], ...] = ()) -> str:
    """One GetProducts PriceList item shaped like the real aws_v1 documents, with optional further tiers."""
    sku = f"SKU{zlib.crc32(f'{service}|{usagetype}|{operation}'.encode()):010d}"
    dims = {}
    for i, (b, price) in enumerate(((begin, usd), *more_tiers)):
        dims[f"{sku}.JRTCKXETXF.{i}"] = {"unit": "Quantity", "beginRange": b, "endRange": "Inf",
                                         "pricePerUnit": {"USD": f"{price:.10f}"}, "description": "x"}
    return json.dumps({"product": {"sku": sku, "attributes": {"usagetype": usagetype, "operation": operation,
                                                             "regionCode": REGION}},
                       "serviceCode": service,
                       "terms": {"OnDemand": {f"{sku}.JRTCKXETXF": {"priceDimensions": dims}}}})


def price_list(q: PlatformQuery, usd: float) -> list[str]:
    """The real usage type of `q` in eu-west-1 plus decoys a careless reader would take."""
    ut = f"{PREFIX}-{q.usagetype.rstrip('$').replace(chr(92), '')}"
    decoys = [product(q.service, f"{PREFIX}-Regional{q.usagetype.rstrip('$')}", usd * 3, q.operation or ""),
              product(q.service, ut + "-Prvd", usd * 5, q.operation or "")]
    if q.operation:
        decoys.append(product(q.service, ut, usd * 7, "SomethingElse"))
    # a tiered product: the first tier (beginRange 0) is the rate; the next tier is cheaper
    return [*decoys, product(q.service, ut, usd, q.operation or "", more_tiers=(("51200", usd / 2),))]


def _bundled(region: str) -> dict[str, float]:
    with (BUNDLED_DIR / "prices.csv").open(newline="") as f:
        return {r["instance_type"]: float(r["usd_per_hour"]) for r in csv.DictReader(f)
                if r["region"] == region and r["purchase"] == "on-demand"}


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("platform")
    with pytest.MonkeyPatch.context() as mp:
        set_dummy_aws_env(mp, tmp, None)
        prices = _bundled(REGION)
        pricing, stub = stub_client("pricing", "us-east-1")
        for t in kept_types():
            stub.add_response("get_products", {"PriceList": [price_list_entry(t, REGION, prices[t])]
                                               if t in prices else [], "FormatVersion": "aws_v1"},
                              {"ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1",
                               "Filters": pricing_filters(t, REGION)})
        for q in PLATFORM_QUERIES:
            filters = [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": REGION}]
            filters += [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in q.filters]
            stub.add_response("get_products", {"PriceList": price_list(q, EU_RATES[q.item]), "FormatVersion": "aws_v1"},
                              {"ServiceCode": q.service, "FormatVersion": "aws_v1", "Filters": filters})
        for t in sorted(EU_CPU):
            stub.add_response("get_products", {"PriceList": [price_list_entry(t, REGION, EU_CPU[t])],
                                               "FormatVersion": "aws_v1"},
                              {"ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1",
                               "Filters": pricing_filters(t, REGION)})
        out = tmp / "catalog"
        with stub:
            refresh_catalog([REGION], out, AwsClients(endpoint_url=moto_url(), injected={"pricing": pricing}),
                            Catalog(), platform=True, allow_shrink=True)
            stub.assert_no_pending_responses()
        yield out


def _plan(region: str, catalog: Path | None = None) -> Any:
    stack = load_stack(STACKS / "Pulumi.dev.yaml", [f"region={region}"])
    return plan_stack(stack, Catalog(catalog) if catalog else Catalog())


def _line(plan: Any, start: str) -> Any:
    return next(c for c in plan.cost_lines if c.name.startswith(start))


def test_bundled_data_prices_the_every_region_lines_and_eu_west_1_nat() -> None:
    """Before: outside us-east-1 every platform line was None ("not priced in eu-west-1"), the EKS control
    plane included although AWS charges one rate everywhere."""
    plan = _plan(REGION)
    assert _line(plan, "EKS control plane").usd_per_month == pytest.approx(0.1 * 730, abs=0.01)
    nat = _line(plan, "NAT gateways")
    assert nat.quantity >= 1 and nat.usd_per_month == pytest.approx(0.048 * 730 * nat.quantity, abs=0.01)
    ipv4 = _line(plan, "Public IPv4")
    assert ipv4.usd_per_month == pytest.approx(0.005 * 730 * ipv4.quantity, abs=0.01)
    assert _line(plan, "Weights storage (S3").usd_per_month is not None  # eu-west-1's own S3 row (cap5)
    assert plan.totals.platform_usd_per_month > 0
    # what the bundled data cannot price (sa-east-1 has no m6i row) is shown unpriced, and the warning names
    # the command that really fetches it
    sa = _plan("sa-east-1")
    assert _line(sa, "System nodes").usd_per_month is None
    assert any("catalog refresh --region sa-east-1 --platform" in w for w in sa.warnings)


def test_refresh_platform_prices_every_line_in_eu_west_1(refreshed: Path) -> None:
    plan = _plan(REGION, refreshed)
    unpriced = [c.name for c in plan.cost_lines if c.usd_per_month is None]
    assert unpriced == []
    assert not any("not priced" in w for w in plan.warnings)
    root = _line(plan, "Node root volumes")
    assert root.usd_per_month == pytest.approx(EU_RATES["EBS gp3 storage"] * root.quantity, abs=0.01)
    s3 = _line(plan, "Weights storage")
    assert s3.usd_per_month == pytest.approx(EU_RATES["S3 Standard storage, first 50 TB/month"] * s3.quantity,
                                             abs=0.01)
    system = _line(plan, "System nodes")
    assert system.usd_per_month == pytest.approx(EU_CPU["m6i.large"] * 730 * system.quantity, abs=0.01) or \
        system.usd_per_month == pytest.approx(EU_CPU["m6i.xlarge"] * 730 * system.quantity, abs=0.01)
    logs = _line(plan, "EKS control-plane logs")
    assert logs.usd_per_month is not None and logs.usd_per_month > 0


def test_refresh_keeps_other_regions_and_the_every_region_rows(refreshed: Path) -> None:
    with (refreshed / "platform_prices.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    by = {(r["item"], r["region"]): r for r in rows}
    # us-east-1's rows and the every-region rows keep their own source and date
    with (BUNDLED_DIR / "platform_prices.csv").open(newline="") as f:
        for r in csv.DictReader(f):
            if r["region"] != REGION:
                assert by[(r["item"], r["region"])]["usd"] == r["usd"]
                assert by[(r["item"], r["region"])]["source"] == r["source"]
    # the refreshed region's rows are the Price List's first tiers, with their source and date
    for item, usd in EU_RATES.items():
        row = by[(item, REGION)]
        assert float(row["usd"]) == pytest.approx(usd) and "AWS Pricing API GetProducts" in row["source"]
    # a us-east-1 plan on the refreshed catalog is priced as on the bundled one
    assert _plan("us-east-1", refreshed).totals.platform_usd_per_month == \
        pytest.approx(_plan("us-east-1").totals.platform_usd_per_month)


@pytest.mark.parametrize("q", PLATFORM_QUERIES, ids=lambda q: q.item)
def test_the_reader_takes_the_first_tier_of_the_billed_usage_type_only(q: PlatformQuery) -> None:
    assert platform_usd_from_price_list(price_list(q, 1.25), q) == pytest.approx(1.25)
    # us-east-1 usage types often have no prefix
    unprefixed = product(q.service, q.usagetype.rstrip("$").replace("\\", ""), 0.75, q.operation or "")
    assert platform_usd_from_price_list([unprefixed], q) == pytest.approx(0.75)
    assert platform_usd_from_price_list([], q) is None


def test_the_bundled_platform_prices_are_what_the_build_script_writes(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """platform_prices.csv is written only by scripts/build_bundled_catalog.py (reference rows + the curated
    every-region and regional rows in scripts/data/platform_prices_extra.csv)."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    ref = next((d / "shared" / "reference" for d in (root.parent, root.parent.parent)
                if (d / "shared" / "reference" / "storage_and_misc.csv").is_file()), None)
    if ref is None:
        pytest.skip("../shared/reference is not here (a clone alone)")
    spec = importlib.util.spec_from_file_location(
        "build_bundled_catalog", Path(__file__).resolve().parents[1] / "scripts" / "build_bundled_catalog.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "DATA", tmp_path)
    mod.build_platform_prices(ref)
    assert (tmp_path / "platform_prices.csv").read_bytes() == (BUNDLED_DIR / "platform_prices.csv").read_bytes()
