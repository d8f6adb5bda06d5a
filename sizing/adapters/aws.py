"""The boto3 adapter: live instance specs, AZ offerings, prices and vCPU quotas from AWS.

The ONLY module in sizing/ that imports boto3; only `llmcap catalog refresh`, `llmcap preflight`
and `llmcap plan --preflight` import it, lazily. It writes and reads the bundled catalog's schema
(instances.csv, prices.csv, offerings.csv), so a refreshed catalog is a drop-in `--catalog DIR`.

APIs: EC2 DescribeInstanceTypes, DescribeInstanceTypeOfferings (by AZ ID), DescribeSpotPriceHistory;
Pricing GetProducts (AmazonEC2, from the us-east-1 Pricing endpoint); Service Quotas
ListServiceQuotas / ListAWSDefaultServiceQuotas (service code ec2). Quotas are found by NAME
(sizing/data/quota_families.csv), never by a hard-coded quota code.

Credentials and region come from the standard boto3 chain. `LLMCAP_AWS_ENDPOINT_URL` points every
client at another endpoint (tests use a local moto server); functions take an `AwsClients` so tests
inject clients directly.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)

from sizing.catalog.paths import BUNDLED_DIR, USER_CACHE_DIR
from sizing.catalog.records import QuotaFamily
from sizing.errors import LlmcapError
from sizing.stack import DEFAULT_REGION

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.plan import Plan, Pool

ENDPOINT_ENV = "LLMCAP_AWS_ENDPOINT_URL"
REFRESHED_PURCHASES = ("on-demand", "spot")  # the prices.csv purchase kinds `_fetch_region` always writes
PRICING_REGION = "us-east-1"  # the Pricing API lives in us-east-1 (also eu-central-1, ap-south-1)
SPOT_PRODUCT = "Linux/UNIX"
ACCESS_DENIED_CODES = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthFailure",
                       "InvalidClientTokenId", "UnrecognizedClientException", "ExpiredToken",
                       "ExpiredTokenException", "SignatureDoesNotMatch", "OptInRequired"}

INSTANCE_FIELDS = ["instance_type", "family", "gpu", "gpu_count", "gpu_memory_gib_each", "vcpus", "memory_gib",
                   "local_nvme_gb", "network_gbps", "efa", "gpu_interconnect", "gpu_interconnect_raw",
                   "usage_classes", "source", "as_of", "notes"]
PRICE_FIELDS = ["instance_type", "region", "purchase", "usd_per_hour", "source", "as_of"]
OFFERING_FIELDS = ["instance_type", "region", "availability_zone_id", "source", "as_of"]
SPOT_AZ_FIELDS = ["instance_type", "region", "availability_zone", "usd_per_hour", "price_changes", "window_start",
                  "window_end", "source", "as_of"]
SPOT_WINDOW_DAYS = 7  # the spot median covers the 7 days before the refresh
# A region whose fresh answer holds less than this share of the rows the cache has for it (GPU
# instance types, AZ offerings, on-demand prices) is refused unless --allow-shrink: an SCP, a region
# that is not opted in or a wrong endpoint answers "nothing", not an error.
SHRINK_FLOOR = 0.5


class AwsAccessError(LlmcapError):
    """Credentials missing, access denied, or AWS unreachable (exit 2, one line)."""


class AwsDataError(LlmcapError):
    """AWS answered, but with data that cannot be used (unreadable, or far less than before) (exit 2)."""


# --- clients and errors ---------------------------------------------------------------------
@dataclass
class AwsClients:
    """Creates boto3 clients from the standard chain. `injected` maps a service name
    ("ec2", "pricing", "service-quotas") to a ready client (tests: a Stubber-wrapped one)."""

    endpoint_url: str | None = None
    injected: dict[str, Any] = field(default_factory=dict)
    _cache: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_env(cls) -> AwsClients:
        return cls(endpoint_url=os.environ.get(ENDPOINT_ENV) or None)

    def client(self, service: str, region: str) -> Any:
        if service in self.injected:
            return self.injected[service]
        key = (service, region)
        if key not in self._cache:
            cfg = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=30)
            self._cache[key] = boto3.session.Session().client(
                service, region_name=region, endpoint_url=self.endpoint_url, config=cfg)
        return self._cache[key]

    def ec2(self, region: str) -> Any:
        return self.client("ec2", region)

    def pricing(self) -> Any:
        return self.client("pricing", PRICING_REGION)

    def quotas(self, region: str) -> Any:
        return self.client("service-quotas", region)

    def savingsplans(self) -> Any:
        return self.client("savingsplans", PRICING_REGION)  # a global service with its endpoint in us-east-1


def default_region() -> str:
    """The region of the standard chain (AWS_REGION, AWS_DEFAULT_REGION, profile), else us-east-1."""
    return boto3.session.Session().region_name or DEFAULT_REGION


@contextmanager
def aws_errors() -> Iterator[None]:
    """Turn credential, permission and connection failures into one-line AwsAccessErrors."""
    try:
        yield
    except (NoCredentialsError, PartialCredentialsError):
        raise AwsAccessError(
            "no AWS credentials found; configure them with `aws configure`, AWS_PROFILE, or "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY") from None
    except NoRegionError:
        raise AwsAccessError("no AWS region; pass --region or set AWS_REGION") from None
    except EndpointConnectionError as e:
        raise AwsAccessError(f"cannot reach AWS ({e.kwargs.get('endpoint_url', 'endpoint')}); check network") from None
    except ClientError as e:
        err = e.response.get("Error", {})
        code = err.get("Code", "")
        op = e.operation_name
        if code in ACCESS_DENIED_CODES:
            raise AwsAccessError(f"AWS access denied for {op} ({code}): {err.get('Message', '')}".rstrip(": ")
                                 + "; grant the IAM permission or use another profile") from None
        raise AwsAccessError(f"AWS {op} failed ({code}): {err.get('Message', '')}") from None
    except BotoCoreError as e:
        raise AwsAccessError(f"AWS call failed: {e}") from None


# --- data files -----------------------------------------------------------------------------
def quota_families(catalog: Catalog | None = None) -> list[QuotaFamily]:
    """quota_families.csv of `catalog` (the default catalog when None)."""
    from sizing.catalog.lookup import load_catalog

    return (catalog or load_catalog()).quota_families


def quota_name_for(family: str, purchase: str, families: list[QuotaFamily] | None = None) -> str | None:
    """The vCPU quota that limits `family` (e.g. g6e) for `purchase`: longest matching prefix."""
    fams = [f for f in (families or quota_families()) if f.purchase == purchase and family.startswith(f.family_prefix)]
    return max(fams, key=lambda f: len(f.family_prefix)).quota_name if fams else None


def catalog_gpu_name(aws_name: str, memory_mib: int, known_gpus: set[str], catalog: Catalog | None = None) -> str:
    """The gpus.csv name for an EC2-reported GPU (e.g. H100 -> H100-SXM; A100 by memory), from the
    catalog's aws_gpu_names.csv (the default catalog when None)."""
    from sizing.catalog.lookup import load_catalog

    for g in (catalog or load_catalog()).aws_gpu_names:
        hi = g.max_gpu_memory_mib
        if g.aws_gpu_name == aws_name and memory_mib >= g.min_gpu_memory_mib and (hi is None or memory_mib <= hi):
            return g.gpu
    by_lower = {g.lower(): g for g in known_gpus}
    return by_lower.get(aws_name.lower(), aws_name)


# --- EC2 instance types ---------------------------------------------------------------------
def _network_gbps(info: dict[str, Any]) -> str:
    """The advertised figure ("Up to 10 Gigabit" -> 10, "3200 Gigabit" -> 3200, "4x 100 Gigabit" -> 400)."""
    m = re.search(r"(?:(\d+)x\s*)?([\d.]+)\s*Gigabit", info.get("NetworkPerformance", ""))
    return f"{int(m.group(1) or 1) * float(m.group(2))}" if m else ""


def _interconnect(family: str, gpu: str, gpu_count: float, catalog: Catalog) -> tuple[str, str]:
    """EC2 does not report NVLink. A multi-GPU P instance whose GPU has NVLink in gpus.csv is
    taken as NVLink/NVSwitch; everything else as PCIe."""
    g = catalog.gpus.get(gpu)
    if family.startswith("p") and gpu_count > 1 and g is not None and g.nvlink_bandwidth_gbs:
        return "nvlink", f"derived: NVLink ({g.nvlink_bandwidth_gbs:g} GB/s per GPU in gpus.csv); not in the EC2 API"
    return "pcie", "derived: PCIe (no NVLink reported for this GPU/instance); not in the EC2 API"


def instance_row(it: dict[str, Any], catalog: Catalog, known: dict[str, dict[str, str]], source: str,
                 as_of: str) -> dict[str, str] | None:
    """One instances.csv row from a DescribeInstanceTypes entry, or None when it has no NVIDIA GPU."""
    gpus = [g for g in it.get("GpuInfo", {}).get("Gpus", []) if g.get("Manufacturer") == "NVIDIA"]
    if not gpus:
        return None
    g = gpus[0]
    name = it["InstanceType"]
    mem_mib = int(g.get("MemoryInfo", {}).get("SizeInMiB", 0))
    count = float(g.get("Count", 0))
    if count < 1:  # a GPU slice (g6f): partition size × logical GPUs
        count = float(g.get("GpuPartitionSize", 0)) * float(g.get("LogicalGpuCount", 1))
    gpu = catalog_gpu_name(g.get("Name", ""), mem_mib, set(catalog.gpus), catalog)
    family = name.split(".")[0]
    if name in known:  # EC2 does not report the interconnect; keep the curated datasheet fact
        ic, ic_raw = known[name]["gpu_interconnect"], known[name].get("gpu_interconnect_raw", "")
    else:
        ic, ic_raw = _interconnect(family, gpu, count, catalog)
    net = it.get("NetworkInfo", {})
    return {
        "instance_type": name, "family": family, "gpu": gpu, "gpu_count": f"{count:g}",
        "gpu_memory_gib_each": str(round(mem_mib / 1024, 2)),
        "vcpus": str(it.get("VCpuInfo", {}).get("DefaultVCpus", "")),
        "memory_gib": str(it.get("MemoryInfo", {}).get("SizeInMiB", 0) / 1024),
        "local_nvme_gb": str(it.get("InstanceStorageInfo", {}).get("TotalSizeInGB", "")),
        "network_gbps": _network_gbps(net), "efa": "yes" if net.get("EfaSupported") else "no",
        "gpu_interconnect": ic, "gpu_interconnect_raw": ic_raw,
        "usage_classes": "/".join(sorted(it.get("SupportedUsageClasses", []))),
        "source": source, "as_of": as_of, "notes": "",
    }


def gpu_type_patterns(families: list[QuotaFamily] | None = None) -> list[str]:
    """instance-type filter values for the G/VT and P classes (where NVIDIA GPUs are), e.g. g*, p*.

    Taken from quota_families.csv so a new GPU class is one data row; gr* is covered by g*."""
    prefixes = sorted({f.family_prefix for f in (families or quota_families())})
    return [f"{p}*" for p in prefixes if not any(p != q and p.startswith(q) for q in prefixes)]


def fetch_instance_types(ec2: Any) -> list[dict[str, Any]]:
    """DescribeInstanceTypes entries of the client's region in the GPU classes that have GPU info."""
    out: list[dict[str, Any]] = []
    pages = ec2.get_paginator("describe_instance_types").paginate(
        Filters=[{"Name": "instance-type", "Values": gpu_type_patterns()}])
    for page in pages:
        out.extend(it for it in page.get("InstanceTypes", []) if it.get("GpuInfo"))
    return out


def fetch_offerings(ec2: Any, instance_types: list[str]) -> dict[str, list[str]]:
    """instance type -> sorted AZ IDs (e.g. use1-az1) of the client's region that offer it."""
    out: dict[str, set[str]] = {t: set() for t in instance_types}
    for chunk in _chunks(instance_types, 100):
        pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone-id", Filters=[{"Name": "instance-type", "Values": chunk}])
        for page in pages:
            for o in page.get("InstanceTypeOfferings", []):
                out.setdefault(o["InstanceType"], set()).add(o["Location"])
    return {t: sorted(v) for t, v in out.items()}


def _chunks(items: list[str], n: int) -> Iterator[list[str]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


# --- prices ---------------------------------------------------------------------------------
def pricing_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """Linux, shared tenancy, no pre-installed software, capacity actually used (not reservations)."""
    fields = {"instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux",
              "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]


def _lowest_on_demand_usd(price_list: list[str], label: str, product_ok: Callable[[dict[str, Any]], bool],
                          dimension_ok: Callable[[dict[str, Any]], bool]) -> float | None:
    """The lowest positive OnDemand USD price in GetProducts' PriceList (JSON strings) among the products whose
    attributes pass `product_ok` and the price dimensions that pass `dimension_ok`; None when none does. An
    unreadable item is one AwsDataError naming it (`label` says which query)."""
    prices: list[float] = []
    for i, text in enumerate(price_list):
        try:
            product = json.loads(text)
            if not product_ok(product.get("product", {}).get("attributes", {})):
                continue
            for offer in product.get("terms", {}).get("OnDemand", {}).values():
                for dim in offer.get("priceDimensions", {}).values():
                    usd = dim.get("pricePerUnit", {}).get("USD")
                    if not usd or not dimension_ok(dim):
                        continue
                    value = float(usd)
                    if not math.isfinite(value) or value < 0:
                        raise ValueError(f"USD {usd!r}")
                    if value > 0:
                        prices.append(value)
        except (ValueError, TypeError, AttributeError) as e:  # JSONDecodeError is a ValueError
            raise AwsDataError(f"{label}: PriceList item {i} is unreadable "
                               f"({e.__class__.__name__}: {str(e)[:80]})") from None
    return min(prices) if prices else None


def _get_products(pricing: Any, service: str, filters: list[dict[str, str]]) -> list[str]:
    """Every PriceList item GetProducts answers for `service` and `filters`, over its pages."""
    texts: list[str] = []
    for page in pricing.get_paginator("get_products").paginate(ServiceCode=service, FormatVersion="aws_v1",
                                                               Filters=filters):
        texts.extend(page.get("PriceList", []))
    return texts


def on_demand_usd_from_price_list(price_list: list[str]) -> float | None:
    """The hourly OnDemand USD price in GetProducts' PriceList (JSON strings).

    Only plain Linux products (operation RunInstances, no license, not a Capacity Block) count;
    if several still match, the lowest non-zero hourly price is taken."""
    return _lowest_on_demand_usd(
        price_list, "AWS Pricing GetProducts",
        lambda a: (a.get("operation", "RunInstances") == "RunInstances"
                   and a.get("marketoption", "OnDemand") == "OnDemand"),
        lambda d: str(d.get("unit", "Hrs")).lower().startswith("hr"))


def fetch_on_demand_price(pricing: Any, instance_type: str, region: str) -> float | None:
    return on_demand_usd_from_price_list(_get_products(pricing, "AmazonEC2", pricing_filters(instance_type, region)))


# --- platform prices ------------------------------------------------------------------------
PLATFORM_PRICE_FIELDS = ["item", "unit", "usd", "region", "source", "as_of", "notes"]
CPU_PRICE_FIELDS = ["instance_type", "region", "purchase", "usd_per_hour", "vcpus", "memory_gib", "source", "as_of",
                    "notes"]
# A region's usage types carry its billing prefix (`EU-NatGateway-Hours` in eu-west-1, `EUC1-...` in
# eu-central-1) and us-east-1's usually none (`NatGateway-Hours`, or `USE1-`): matched as an optional prefix.
_PREFIX = r"^(?:[A-Z0-9]+-)?"


@dataclass(frozen=True)
class PlatformQuery:
    """How one platform_prices.csv item is found in the Price List (GetProducts): the service, exact-match
    filters besides the region, the usage type (without its region prefix) and, where the usage type is
    shared, the operation. The first price tier (beginRange 0) is read."""

    item: str  # platform_prices.csv item
    unit: str  # platform_prices.csv unit
    service: str
    filters: tuple[tuple[str, str], ...]
    usagetype: str  # regular expression after the region prefix
    operation: str | None = None


# Each usage type is the one AWS bills for the line (AWS Cost and Usage Report usage types; the same
# names in public Price List readers, e.g. infracost's and the AWS CloudWatch Logs user guide's
# "TimedStorage-ByteHrs (Standard)"), so a refresh reads what the bill will say.
PLATFORM_QUERIES: tuple[PlatformQuery, ...] = (
    PlatformQuery("EKS control plane (standard support)", "USD per cluster-hour", "AmazonEKS", (),
                  r"AmazonEKS-Hours:perCluster$"),
    PlatformQuery("NAT gateway hourly", "USD per NAT-gateway-hour", "AmazonEC2", (("productFamily", "NAT Gateway"),),
                  r"NatGateway-Hours$", "NatGateway"),
    PlatformQuery("Public IPv4 address", "USD per IP-hour", "AmazonVPC", (),
                  r"PublicIPv4:InUseAddress$"),
    PlatformQuery("EBS gp3 storage", "USD per GB-month", "AmazonEC2",
                  (("productFamily", "Storage"), ("volumeApiName", "gp3")), r"EBS:VolumeUsage\.gp3$"),
    PlatformQuery("S3 Standard storage, first 50 TB/month", "USD per GB-month", "AmazonS3",
                  (("volumeType", "Standard"),), r"TimedStorage-ByteHrs$"),
    PlatformQuery("CloudWatch Logs ingestion (standard class)", "USD per GB", "AmazonCloudWatch", (),
                  r"DataProcessing-Bytes$", "PutLogEvents"),
    PlatformQuery("CloudWatch Logs storage", "USD per GB-month", "AmazonCloudWatch", (),
                  r"TimedStorage-ByteHrs$"),
)


def platform_usd_from_price_list(price_list: list[str], q: PlatformQuery) -> float | None:
    """The OnDemand USD unit price of `q` in GetProducts' PriceList (JSON strings): products whose usage type
    is `q.usagetype` (after an optional region prefix) and, when given, whose operation is `q.operation`; of
    their price dimensions the first tier (beginRange 0, or no tiers). Several matches: the lowest positive."""
    pattern = re.compile(_PREFIX + q.usagetype)
    return _lowest_on_demand_usd(
        price_list, f"AWS Pricing GetProducts ({q.service})",
        lambda a: bool(pattern.match(str(a.get("usagetype", "")))) and q.operation in (None, a.get("operation")),
        lambda d: str(d.get("beginRange", "0")) in ("0", "0.0"))


def fetch_platform_price(pricing: Any, q: PlatformQuery, region: str) -> float | None:
    """`q`'s USD unit price in `region` from the Price List, or None when AWS lists none there."""
    filters = [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}]
    filters += [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in q.filters]
    return platform_usd_from_price_list(_get_products(pricing, q.service, filters), q)


@dataclass(frozen=True)
class SpotAz:
    """The spot price of one instance type in one AZ over the window: the time-weighted median ($/hour)."""

    usd_per_hour: float
    price_changes: int  # price records that fell in (or were in effect at the start of) the window


def _weighted_median(points: list[tuple[datetime, float]], start: datetime, end: datetime) -> float:
    """Median over [start, end] of a step function: each price holds from its record until the next.

    DescribeSpotPriceHistory "returns the prices of the instance types within that time range. It also
    returns the last price change before the start time, which is the effective price as of the start
    time" (EC2 API reference, DescribeSpotPriceHistory)."""
    pts = sorted(points)
    spans: list[tuple[float, float]] = []
    for i, (ts, usd) in enumerate(pts):
        lo = max(ts, start)
        hi = pts[i + 1][0] if i + 1 < len(pts) else end
        spans.append((usd, max((min(hi, end) - lo).total_seconds(), 0.0)))
    total = sum(w for _, w in spans)
    if total <= 0:
        return pts[-1][1]
    acc = 0.0
    for usd, w in sorted(spans):
        acc += w
        if acc >= total / 2:
            return usd
    return sorted(spans)[-1][0]


def fetch_spot_prices(ec2: Any, instance_types: list[str], region: str, now: datetime | None = None,
                      window_days: int = SPOT_WINDOW_DAYS) -> dict[str, dict[str, SpotAz]]:
    """instance type -> AZ name -> its Linux/UNIX spot price over the `window_days` before `now`.

    Local Zones are left out (only <region><letter> AZs). A record without a readable SpotPrice is
    an AwsDataError, not a skipped row."""
    now = now or datetime.now(UTC)
    start = now - timedelta(days=window_days)
    history: dict[tuple[str, str], list[tuple[datetime, float]]] = {}
    regular_az = re.compile(rf"^{re.escape(region)}[a-z]$")
    for chunk in _chunks(instance_types, 100):
        pages = ec2.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=chunk, ProductDescriptions=[SPOT_PRODUCT], StartTime=start, EndTime=now)
        for page in pages:
            for h in page.get("SpotPriceHistory", []):
                az = h.get("AvailabilityZone", "")
                if not regular_az.match(az) or not h.get("ProductDescription", "").startswith(SPOT_PRODUCT):
                    continue
                try:
                    usd = float(h["SpotPrice"])
                    if not math.isfinite(usd) or usd <= 0:
                        raise ValueError(h["SpotPrice"])
                    ts = h.get("Timestamp") or start
                    if ts.tzinfo is None:
                        ts = ts.replace(tzinfo=UTC)
                    history.setdefault((h["InstanceType"], az), []).append((ts, usd))
                except (KeyError, ValueError, TypeError, AttributeError) as e:
                    raise AwsDataError(f"AWS EC2 DescribeSpotPriceHistory ({region}): a record for "
                                       f"{h.get('InstanceType', '?')} in {az} has no usable SpotPrice "
                                       f"({e.__class__.__name__}: {str(e)[:60]})") from None
    out: dict[str, dict[str, SpotAz]] = {}
    for (t, az), pts in history.items():
        out.setdefault(t, {})[az] = SpotAz(_weighted_median(pts, start, now), len(pts))
    return out


# Compute Savings Plans, No Upfront: the plan length in seconds (SavingsPlanOffering.durationSeconds)
# -> the prices.csv purchase kind
SAVINGS_PLAN_KINDS = {31_536_000: "savings-plan-1yr", 94_608_000: "savings-plan-3yr"}
SAVINGS_PLAN_SOURCE = ("AWS Savings Plans DescribeSavingsPlansOfferingRates (Compute, No Upfront; Linux/UNIX, shared "
                       "tenancy, RunInstances BoxUsage)")


def fetch_savings_plan_rates(sp: Any, instance_types: list[str], region: str) -> dict[tuple[str, str], float]:
    """(instance type, savings-plan-1yr | savings-plan-3yr) -> USD per instance-hour under a Compute
    Savings Plan with no upfront payment in `region`. A result without a readable rate is an AwsDataError."""
    out: dict[tuple[str, str], float] = {}
    for chunk in _chunks(instance_types, 100):
        token: str | None = None
        while True:
            kw: dict[str, Any] = {"nextToken": token} if token else {}
            page = sp.describe_savings_plans_offering_rates(
                savingsPlanTypes=["Compute"], savingsPlanPaymentOptions=["No Upfront"], products=["EC2"],
                serviceCodes=["AmazonEC2"], operations=["RunInstances"], maxResults=1000,
                filters=[{"name": "region", "values": [region]}, {"name": "instanceType", "values": chunk},
                         {"name": "tenancy", "values": ["shared"]},
                         {"name": "productDescription", "values": ["Linux/UNIX"]}], **kw)
            for r in page.get("searchResults", []):
                kind = SAVINGS_PLAN_KINDS.get(int(r.get("savingsPlanOffering", {}).get("durationSeconds", 0)))
                props = {p.get("name"): p.get("value") for p in r.get("properties", [])}
                t = props.get("instanceType")
                if kind is None or t not in chunk or "BoxUsage" not in r.get("usageType", ""):
                    continue
                try:
                    usd = float(r["rate"])
                    if not math.isfinite(usd) or usd <= 0:
                        raise ValueError(r["rate"])
                except (KeyError, ValueError, TypeError) as e:
                    raise AwsDataError(f"AWS Savings Plans DescribeSavingsPlansOfferingRates ({region}): the {kind} "
                                       f"rate of {t} is unreadable ({e.__class__.__name__}: {str(e)[:60]})") from None
                out[(str(t), kind)] = usd
            token = page.get("nextToken")
            if not token:
                break
    return out


CAPACITY_BLOCK_HOURS = 24  # the shortest Capacity Block length (CapacityDurationHours), priced per instance-hour


def fetch_capacity_block_rates(ec2: Any, instance_types: list[str], region: str) -> dict[str, tuple[float, str]]:
    """instance type -> (USD per instance-hour of its cheapest one-instance, 24-hour Capacity Block
    offering = UpfrontFee ÷ (InstanceCount × CapacityBlockDurationHours), what it was: AZ and start).
    A type with no offering now is left out; an offering without a readable fee is an AwsDataError."""
    out: dict[str, tuple[float, str]] = {}
    for t in instance_types:
        token: str | None = None
        while True:
            kw: dict[str, Any] = {"NextToken": token} if token else {}
            page = ec2.describe_capacity_block_offerings(InstanceType=t, InstanceCount=1,
                                                         CapacityDurationHours=CAPACITY_BLOCK_HOURS, **kw)
            for o in page.get("CapacityBlockOfferings", []):
                try:
                    if o.get("CurrencyCode", "USD") != "USD":
                        raise ValueError(f"currency {o.get('CurrencyCode')}")
                    usd = float(o["UpfrontFee"]) / (int(o["InstanceCount"]) * int(o["CapacityBlockDurationHours"]))
                    if not math.isfinite(usd) or usd <= 0:
                        raise ValueError(o["UpfrontFee"])
                except (KeyError, ValueError, TypeError, ZeroDivisionError) as e:
                    raise AwsDataError(f"AWS EC2 DescribeCapacityBlockOfferings ({region}): an offering of {t} has no "
                                       f"usable UpfrontFee ({e.__class__.__name__}: {str(e)[:60]})") from None
                start = o.get("StartDate")
                what = f"{o.get('AvailabilityZone', '?')}, starting {start:%Y-%m-%d}" if isinstance(start, datetime) \
                    else str(o.get("AvailabilityZone", "?"))
                if t not in out or usd < out[t][0]:
                    out[t] = (usd, what)
            token = page.get("NextToken")
            if not token:
                break
    return out


# --- catalog refresh ------------------------------------------------------------------------
@dataclass
class RefreshResult:
    out_dir: Path
    regions: list[str]
    instances: int
    prices: int
    offerings: int
    skipped: list[str]
    unpriced: list[str]
    spot_azs: int = 0  # (instance type, AZ) spot medians written
    generation: str = ""  # the directory the cache now points to


@dataclass
class _RegionAnswer:
    types: list[str] = field(default_factory=list)
    offers: list[dict[str, str]] = field(default_factory=list)
    prices: list[dict[str, str]] = field(default_factory=list)
    spot_azs: list[dict[str, str]] = field(default_factory=list)
    platform: list[dict[str, str]] = field(default_factory=list)  # platform_prices.csv rows (refresh --platform)
    cpu: list[dict[str, str]] = field(default_factory=list)  # cpu_instance_prices.csv rows (refresh --platform)


def _write(path: Path, fields: list[str], rows: list[dict[str, str]]) -> None:
    """One CSV table, flushed and fsynced (the generation directory is renamed only after this)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in fields})
        f.flush()
        os.fsync(f.fileno())


def _existing(out_dir: Path, name: str) -> list[dict[str, str]]:
    """Rows of the table being replaced: the out dir's own file, else the bundled one."""
    from sizing.catalog.schema import read_table

    p = out_dir / name if (out_dir / name).is_file() else BUNDLED_DIR / name
    return read_table(p, name) if p.is_file() else []


def _fetch_region(region: str, clients: AwsClients, catalog: Catalog, known: dict[str, dict[str, str]],
                  as_of: str, now: datetime, inst_rows: dict[str, dict[str, str]], skipped: set[str],
                  unpriced: list[str], savings_plans: bool = False,
                  capacity_blocks: tuple[str, ...] = (), platform: bool = False) -> _RegionAnswer:
    """Everything AWS says about one region, parsed; any unreadable item is an AwsDataError."""
    ans = _RegionAnswer()
    ec2 = clients.ec2(region)
    step = "DescribeInstanceTypes"
    try:
        for it in fetch_instance_types(ec2):
            row = instance_row(it, catalog, known, f"AWS EC2 DescribeInstanceTypes ({region})", as_of)
            if row is None:
                continue
            if row["gpu"] not in catalog.gpus and row["instance_type"] not in known:
                skipped.add(f"{row['instance_type']} (GPU {row['gpu']} not in gpus.csv)")
                continue
            inst_rows.setdefault(row["instance_type"], row)
            ans.types.append(row["instance_type"])
        ans.types.sort()
        step = "DescribeInstanceTypeOfferings"
        for t, azs in fetch_offerings(ec2, ans.types).items():
            ans.offers.extend({"instance_type": t, "region": region, "availability_zone_id": az,
                               "source": f"AWS EC2 DescribeInstanceTypeOfferings availability-zone-id ({region})",
                               "as_of": as_of} for az in azs)
        step = "GetProducts"
        for t in ans.types:
            usd = _price_or_note(partial(fetch_on_demand_price, clients.pricing(), t, region), f"{t} in {region}",
                                 unpriced)
            if usd is None:
                continue
            ans.prices.append({"instance_type": t, "region": region, "purchase": "on-demand",
                               "usd_per_hour": repr(usd), "as_of": as_of,
                               "source": "AWS Pricing API GetProducts (AmazonEC2; Linux, Shared, NA, Used)"})
        if savings_plans:
            step = "DescribeSavingsPlansOfferingRates"
            for (t, kind), usd in sorted(fetch_savings_plan_rates(clients.savingsplans(), ans.types, region).items()):
                ans.prices.append({"instance_type": t, "region": region, "purchase": kind, "usd_per_hour": repr(usd),
                                   "as_of": as_of, "source": SAVINGS_PLAN_SOURCE})
        if capacity_blocks:
            step = "DescribeCapacityBlockOfferings"
            for t, (usd, what) in sorted(fetch_capacity_block_rates(ec2, list(capacity_blocks), region).items()):
                ans.prices.append({"instance_type": t, "region": region, "purchase": "capacity-block",
                                   "usd_per_hour": repr(usd), "as_of": as_of,
                                   "source": f"AWS EC2 DescribeCapacityBlockOfferings (cheapest 1-instance "
                                             f"{CAPACITY_BLOCK_HOURS} h block: UpfrontFee ÷ instance-hours; {what})"})
        if platform:
            step = "GetProducts (platform)"
            _fetch_platform(region, clients, catalog, as_of, ans, unpriced)
        step = "DescribeSpotPriceHistory"
        start = now - timedelta(days=SPOT_WINDOW_DAYS)
        window = f"{start:%Y-%m-%dT%H:%MZ}/{now:%Y-%m-%dT%H:%MZ}"
        for t, by_az in sorted(fetch_spot_prices(ec2, ans.types, region, now).items()):
            for az, sp in sorted(by_az.items()):
                ans.spot_azs.append({"instance_type": t, "region": region, "availability_zone": az,
                                     "usd_per_hour": repr(sp.usd_per_hour), "price_changes": str(sp.price_changes),
                                     "window_start": f"{start:%Y-%m-%dT%H:%M:%SZ}",
                                     "window_end": f"{now:%Y-%m-%dT%H:%M:%SZ}", "as_of": as_of,
                                     "source": f"AWS EC2 DescribeSpotPriceHistory (Linux/UNIX; time-weighted "
                                               f"median over {window})"})
            best = min(by_az.values(), key=lambda x: x.usd_per_hour)
            ans.prices.append({"instance_type": t, "region": region, "purchase": "spot",
                               "usd_per_hour": repr(best.usd_per_hour), "as_of": as_of,
                               "source": f"AWS EC2 DescribeSpotPriceHistory (Linux/UNIX; per AZ the time-weighted "
                                         f"median over the {SPOT_WINDOW_DAYS} days {window}, lowest of "
                                         f"{len(by_az)} AZ(s); per AZ in spot_prices.csv)"})
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise AwsDataError(f"AWS EC2 {step} ({region}) returned data llmcap cannot read "
                           f"({e.__class__.__name__}: {str(e)[:80]}); the catalog cache is unchanged") from None
    return ans


def _price_or_note(fetch: Callable[[], float | None], what: str, unpriced: list[str],
                   where: str | None = None) -> float | None:
    """One GetProducts price (USD): a failed call is one problem naming what it priced (`where`, default
    `what`); a price AWS does not list goes to `unpriced` as `what` and is None."""
    try:
        usd = fetch()
    except AwsDataError as e:
        raise AwsDataError(f"{e.problems[0]} for {where or what}") from None
    if usd is None:
        unpriced.append(what)
    return usd


def _fetch_platform(region: str, clients: AwsClients, catalog: Catalog, as_of: str, ans: _RegionAnswer,
                    unpriced: list[str]) -> None:
    """The platform's unit prices in `region` (PLATFORM_QUERIES) and the on-demand price of every system-node
    CPU instance type the catalog knows, into `ans`; what AWS does not list there goes to `unpriced`."""
    for q in PLATFORM_QUERIES:
        usd = _price_or_note(partial(fetch_platform_price, clients.pricing(), q, region), f"{q.item} in {region}",
                             unpriced, f"{q.item!r} in {region}")
        if usd is None:
            continue
        ans.platform.append({"item": q.item, "unit": q.unit, "usd": repr(usd), "region": region, "as_of": as_of,
                             "source": f"AWS Pricing API GetProducts ({q.service}; usage type {q.usagetype.rstrip('$')}"
                                       f"{', operation ' + q.operation if q.operation else ''}; first tier)",
                             "notes": "llmcap catalog refresh --platform"})
    cpu_types = sorted({c.instance_type: c for c in catalog.cpu_instances.values()}.items())
    for t, c in cpu_types:
        usd = _price_or_note(partial(fetch_on_demand_price, clients.pricing(), t, region), f"{t} in {region}",
                             unpriced)
        if usd is None:
            continue
        ans.cpu.append({"instance_type": t, "region": region, "purchase": "on-demand", "usd_per_hour": repr(usd),
                        "vcpus": str(c.vcpus), "memory_gib": f"{c.memory_gib:g}", "as_of": as_of,
                        "source": "AWS Pricing API GetProducts (AmazonEC2; Linux, Shared, NA, Used)",
                        "notes": "llmcap catalog refresh --platform"})


def _shrink_problems(region: str, ans: _RegionAnswer, out: Path) -> list[str]:
    """Why this region's answer may not replace the cache's rows for it (empty, or far smaller)."""
    before = {
        "GPU instance types": len({r["instance_type"] for r in _existing(out, "offerings.csv")
                                   if r["region"] == region}),
        "AZ offerings": sum(r["region"] == region for r in _existing(out, "offerings.csv")),
        "on-demand prices": sum(r["region"] == region and r["purchase"] == "on-demand"
                                for r in _existing(out, "prices.csv")),
    }
    after = {"GPU instance types": len(ans.types), "AZ offerings": len(ans.offers),
             "on-demand prices": sum(r["purchase"] == "on-demand" for r in ans.prices)}
    out_lines = []
    for what, n in after.items():
        if n == 0 and what != "on-demand prices":
            had = f" (the cache has {before[what]})" if before[what] else ""
            out_lines.append(f"{what}: AWS returned none{had}")
        elif before[what] and n < SHRINK_FLOOR * before[what]:
            out_lines.append(f"{what}: {before[what]} -> {n}")
    return out_lines


def refresh_catalog(regions: list[str], out_dir: Path | None, clients: AwsClients, catalog: Catalog,
                    today: date | None = None, allow_shrink: bool = False,
                    now: datetime | None = None, savings_plans: bool = False,
                    capacity_blocks: tuple[str, ...] = (), platform: bool = False) -> RefreshResult:
    """Write a new generation of instances.csv, prices.csv, offerings.csv and spot_prices.csv for
    `regions` and point `out_dir` at it atomically.

    Everything is fetched and parsed first; nothing is written unless every region answered with
    readable data and (unless `allow_shrink`) with at least SHRINK_FLOOR of the rows the cache has
    for it. Rows of other regions (and instance types not seen live) are kept from the table being
    replaced, with their own source and as_of. Kept GPU types: those whose GPU is in gpus.csv or
    that the catalog already lists; others are reported as skipped. `savings_plans`: also the 1- and
    3-year Compute Savings Plan rates (savingsplans:DescribeSavingsPlansOfferingRates, a separate permission).
    `capacity_blocks`: instance types whose Capacity Block rate to read (DescribeCapacityBlockOfferings).
    `platform`: also the platform's unit prices in each region (EKS, NAT gateway, public IPv4, EBS gp3, S3,
    CloudWatch Logs: PLATFORM_QUERIES) and the system nodes' CPU instance prices, into platform_prices.csv and
    cpu_instance_prices.csv; a refreshed region's fetched rows replace its old ones, every other row is kept."""
    out = out_dir or USER_CACHE_DIR
    refuse_foreign_directory(out.absolute())  # before the lock file is made beside it
    with cache_lock(out):  # read the cache, fetch, merge and write as one step: no refresh reverts another's
        return _refresh_locked(regions, out, clients, catalog, today, allow_shrink, now, savings_plans,
                               tuple(capacity_blocks), platform)


# how long a refresh waits for another refresh of the same cache to finish (one region's fetch takes seconds
# to a minute); the lock is an flock, which the kernel releases when its holder exits, kill -9 included, so
# a lock is never stale: a dead refresh never blocks the next one
LOCK_WAIT_S = 300.0


@contextmanager
def cache_lock(out: Path, wait_s: float | None = None) -> Iterator[None]:
    """Hold the catalog cache `out`'s lock (`.<name>.lock` beside it, fcntl.flock) for the block; wait at most
    `wait_s` (LOCK_WAIT_S) for another holder, then one AwsDataError naming it."""
    import fcntl
    import time

    out = out.absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = out.parent / f".{out.name}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + (LOCK_WAIT_S if wait_s is None else wait_s)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "another process"
                    raise AwsDataError(f"another catalog refresh of {out} is running (pid {holder}); the cache "
                                       "is unchanged: run this one again when it has finished") from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _refresh_locked(regions: list[str], out: Path, clients: AwsClients, catalog: Catalog, today: date | None,
                    allow_shrink: bool, now: datetime | None, savings_plans: bool,
                    capacity_blocks: tuple[str, ...], platform: bool = False) -> RefreshResult:
    now = now or datetime.now(UTC)
    as_of = (today or now.date()).isoformat()
    inst_rows: dict[str, dict[str, str]] = {}
    skipped: set[str] = set()
    unpriced: list[str] = []
    known = {r["instance_type"]: r for r in _existing(out, "instances.csv")}
    answers: dict[str, _RegionAnswer] = {}
    for region in regions:
        ans = _fetch_region(region, clients, catalog, known, as_of, now, inst_rows, skipped, unpriced, savings_plans,
                            tuple(capacity_blocks), platform)
        shrink = _shrink_problems(region, ans, out)
        if shrink and not allow_shrink:
            raise AwsDataError(
                f"refresh refused for {region}: {'; '.join(shrink)} (an SCP, a region that is not opted in, or "
                "another endpoint?); the catalog cache is unchanged; pass --allow-shrink to accept the smaller answer")
        answers[region] = ans
    refreshed = set(regions)
    kept_inst = [r for r in known.values() if r["instance_type"] not in inst_rows]
    all_inst = sorted(list(inst_rows.values()) + kept_inst, key=lambda r: _instance_sort_key(r["instance_type"]))
    offer_rows = [r for a in answers.values() for r in a.offers]
    price_rows = [r for a in answers.values() for r in a.prices]
    spot_rows = [r for a in answers.values() for r in a.spot_azs]
    all_offers = [r for r in _existing(out, "offerings.csv") if r["region"] not in refreshed] + offer_rows
    all_offers.sort(key=lambda r: (r["instance_type"], r["region"], r["availability_zone_id"]))
    # a refreshed region's on-demand and spot rows are replaced; the purchase kinds a refresh does not
    # fetch (reserved, Savings Plan, Capacity Block rows) are kept with their own source and date
    fetched = REFRESHED_PURCHASES + (tuple(SAVINGS_PLAN_KINDS.values()) if savings_plans else ())
    all_prices = [r for r in _existing(out, "prices.csv")
                  if r["region"] not in refreshed or (r["purchase"] not in fetched and not (
                      r["purchase"] == "capacity-block" and r["instance_type"] in capacity_blocks))] + price_rows
    all_spot = [r for r in _existing(out, "spot_prices.csv") if r["region"] not in refreshed] + spot_rows
    all_spot.sort(key=lambda r: (r["instance_type"], r["region"], r["availability_zone"]))
    tables = {"instances.csv": (INSTANCE_FIELDS, all_inst), "offerings.csv": (OFFERING_FIELDS, all_offers),
              "prices.csv": (PRICE_FIELDS, all_prices), "spot_prices.csv": (SPOT_AZ_FIELDS, all_spot)}
    if platform:
        # only the (item, region) and (instance type, region) pairs fetched are replaced: EFS, FSx, extended
        # support and the every-region (`*`) rows keep their own source and date
        new_plat = [r for a in answers.values() for r in a.platform]
        got = {(r["item"], r["region"]) for r in new_plat}
        tables["platform_prices.csv"] = (PLATFORM_PRICE_FIELDS, [
            r for r in _existing(out, "platform_prices.csv") if (r["item"], r["region"]) not in got] + new_plat)
        new_cpu = [r for a in answers.values() for r in a.cpu]
        got_cpu = {(r["instance_type"], r["region"], r["purchase"]) for r in new_cpu}
        tables["cpu_instance_prices.csv"] = (CPU_PRICE_FIELDS, [
            r for r in _existing(out, "cpu_instance_prices.csv")
            if (r["instance_type"], r["region"], r["purchase"]) not in got_cpu] + new_cpu)
    gen = write_generation(out, tables)
    return RefreshResult(out, list(regions), len(inst_rows), len(price_rows), len(offer_rows),
                         sorted(skipped), unpriced, len(spot_rows), str(gen))


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False where unavailable."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def refuse_foreign_directory(out: Path) -> None:
    """Never swap away (or leave a lock file beside) a directory that is not a catalog (--out . or --out ~):
    one AwsDataError naming what it holds."""
    if out.is_dir() and not out.is_symlink():
        foreign = sorted(f.name for f in out.iterdir() if not (f.is_file() and f.name.endswith(".csv")))
        if foreign:
            raise AwsDataError(f"{out} is not a catalog directory (it holds {', '.join(foreign[:3])}); "
                               "give a new directory or one that holds only catalog CSV files")


def write_generation(out: Path, tables: dict[str, tuple[list[str], list[dict[str, str]]]]) -> Path:
    """Write `tables` as a new generation directory beside `out` and make `out` a symlink to it in one
    rename, so a reader sees the old generation or the new one whole, never a mix or a truncated file.

    Files of the current generation that are not in `tables` (a user's own gpus.csv) are carried over.
    The previous generation is kept (a reader that resolved it still reads it whole); older ones are
    removed. Any failure removes what was written and leaves `out` as it was (AwsDataError for OSError)."""
    out = out.absolute()
    refuse_foreign_directory(out)
    parent = out.parent
    stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}-{os.getpid()}"
    tmp = parent / f".{out.name}.new-{stamp}"
    gen = parent / f".{out.name}.gen-{stamp}"
    link = parent / f".{out.name}.link-{stamp}"
    current = out.resolve() if out.exists() else None
    legacy = parent / f".{out.name}.gen-{stamp}-legacy"
    swapped = False
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        if current is not None and current.is_dir():
            for f in current.iterdir():
                if f.is_file() and f.name not in tables:
                    shutil.copy2(f, tmp / f.name)
        for name, (fields, rows) in tables.items():
            _write(tmp / name, fields, rows)
        _fsync_dir(tmp)
        os.rename(tmp, gen)
        os.symlink(gen.name, link)
        if out.is_symlink() or not out.exists():
            os.replace(link, out)
        elif _exchange(link, out):  # a real directory from an older llmcap: swap it for the link
            os.rename(link, legacy)
        else:
            os.rename(out, legacy)
            os.replace(link, out)
        swapped = True
        _fsync_dir(parent)
    except OSError as e:
        raise AwsDataError(f"cannot write the catalog cache in {parent} ({e.__class__.__name__}: {e.strerror}); "
                           "it is unchanged") from None
    finally:
        if not swapped:
            for leftover in (tmp, gen):
                shutil.rmtree(leftover, ignore_errors=True)
            if link.is_symlink():
                link.unlink()
    _prune_generations(out, keep={gen.name, legacy.name, current.name if current is not None else ""})
    return gen


def _prune_generations(out: Path, keep: set[str]) -> None:
    for d in out.parent.glob(f".{out.name}.gen-*"):
        if d.name not in keep and d.is_dir() and not d.is_symlink():
            shutil.rmtree(d, ignore_errors=True)


def _instance_sort_key(name: str) -> tuple[str, float, str]:
    """g6.xlarge < g6.2xlarge < g6.12xlarge < g6.metal."""
    family, _, size = name.partition(".")
    m = re.match(r"(\d*)xlarge$", size)
    n = (float(m.group(1) or 1)) if m else (0.5 if size == "large" else 1e6)
    return family, n, size


# --- quotas ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Quota:
    name: str
    code: str
    value: float
    applied: bool  # False: the AWS default (the account's applied value was not listed)


def fetch_vcpu_quotas(sq: Any, names: set[str]) -> dict[str, Quota]:
    """Quotas of service ec2 whose name is in `names`: applied values, else AWS defaults."""
    found: dict[str, Quota] = {}
    for page in sq.get_paginator("list_service_quotas").paginate(ServiceCode="ec2"):
        for q in page.get("Quotas", []):
            if q.get("QuotaName") in names:
                found[q["QuotaName"]] = Quota(q["QuotaName"], q["QuotaCode"], float(q.get("Value", 0)), True)
    if names - set(found):
        for page in sq.get_paginator("list_aws_default_service_quotas").paginate(ServiceCode="ec2"):
            for q in page.get("Quotas", []):
                n = q.get("QuotaName")
                if n in names and n not in found:
                    found[n] = Quota(n, q["QuotaCode"], float(q.get("Value", 0)), False)
    return found


def increase_command(code: str, desired: int, region: str) -> str:
    return (f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {code} "
            f"--desired-value {desired} --region {region}")


# --- preflight ------------------------------------------------------------------------------
@dataclass
class Check:
    check: str  # "offered" | "capacity" | "quota"
    instance_type: str
    offered_azs: list[str]
    status: str  # pass | fail | unknown | info (a note, not a failure)
    detail: str
    quota_name: str | None = None
    quota_code: str | None = None
    quota_vcpus: float | None = None
    required_vcpus: int | None = None
    fix: str | None = None


@dataclass
class PreflightReport:
    region: str
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.status in ("pass", "info") for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"region": self.region, "checks": [c.__dict__ for c in self.checks], "ok": self.ok}


def _offered_check(instance_type: str, azs: list[str], region: str, catalog: Catalog) -> Check:
    if azs:
        return Check("offered", instance_type, azs, "pass",
                     f"offered in {len(azs)} AZ(s) of {region}: {', '.join(azs)}")
    others = [r for r in catalog.regions_offering(instance_type) if r != region]
    where = f"; regions that offer it: {', '.join(others)}" if others else "; no region in the catalog offers it"
    return Check("offered", instance_type, [], "fail", f"{instance_type} is not offered in {region}{where}")


# states in which a reservation holds or will hold capacity (EC2 API Reference, CapacityReservation.State:
# active | expired | cancelled | pending | failed | scheduled | payment-pending | payment-failed | ...)
USABLE_RESERVATION_STATES = ("active", "scheduled")


def _reservation_check(p: Pool, found: dict[str, Any] | None, now: datetime) -> Check:
    """One pool on a reservation or Capacity Block against what DescribeCapacityReservations says:
    exists, active or scheduled, same instance type, same AZ, enough instances, time left. One line."""
    rid = p.capacity_reservation_id or ""
    name = "capacity block" if p.purchase == "capacity-block" else "capacity reservation"

    def fail(why: str) -> Check:
        return Check("capacity", p.instance_type, [], "fail", f"{p.name}: {name} {rid} {why}")

    if found is None:
        return fail(f"not found in {p.availability_zone_id} (aws ec2 describe-capacity-reservations "
                    f"--capacity-reservation-ids {rid}); check the id and the region")
    state = str(found.get("State", "unknown"))
    end = found.get("EndDate")
    if state not in USABLE_RESERVATION_STATES:
        ended = f" (ended {end:%Y-%m-%d})" if isinstance(end, datetime) else ""
        return fail(f"is {state}{ended}: the pool would get no capacity; reserve again and update "
                    "llmcap:hardware.capacity")
    if found.get("InstanceType") != p.instance_type:
        return fail(f"holds {found.get('InstanceType')}, the pool runs {p.instance_type}")
    az = found.get("AvailabilityZoneId")
    if az != p.availability_zone_id:
        return fail(f"is in {az}, the stack says {p.availability_zone_id}: the node group's subnets would be in "
                    "the wrong AZ; set availability_zone_id to the reservation's")
    held = int(found.get("TotalInstanceCount", 0))
    if held < p.instances_max:
        return fail(f"holds {held} × {p.instance_type}, the pool needs {p.instances_max}; re-plan with its count")
    left = ""
    if isinstance(end, datetime):
        days = (end - now).total_seconds() / 86400
        if days <= 0:
            return fail(f"ended {end:%Y-%m-%d}: the pool would get no capacity")
        left = f", {days:.1f} days left (ends {end:%Y-%m-%d})"
    return Check("capacity", p.instance_type, [str(az)], "pass",
                 f"{p.name}: {name} {rid} {state}, {held} × {p.instance_type} in {az}{left}")


def _no_reservation_check(p: Pool, region: str) -> Check:
    """A GPU pool on plain on-demand: capacity is not guaranteed; how to reserve it (one line)."""
    return Check("capacity", p.instance_type, [], "info",
                 f"{p.name}: on-demand {p.instance_type} capacity is not guaranteed (no reservation in "
                 "llmcap:hardware.capacity); to hold it: aws ec2 describe-capacity-block-offerings "
                 f"--instance-type {p.instance_type} --instance-count {p.instances_max} --capacity-duration-hours 24 "
                 f"--region {region}, then aws ec2 purchase-capacity-block --capacity-block-offering-id <id> "
                 "--instance-platform Linux/UNIX")


def capacity_checks(ec2: Any, plan: Plan, region: str, now: datetime | None = None) -> list[Check]:
    """Each pool's reservation or Capacity Block (DescribeCapacityReservations), and one line per
    on-demand pool without one."""
    now = now or datetime.now(UTC)
    ids = sorted({p.capacity_reservation_id for p in plan.pools
                  if p.capacity_reservation_id and p.capacity_reservation_id.startswith("cr-")})
    found: dict[str, Any] = {}
    for rid in ids:  # one call per id: an unknown id fails the whole call (InvalidCapacityReservationId.NotFound)
        try:
            for r in ec2.describe_capacity_reservations(CapacityReservationIds=[rid]).get("CapacityReservations", []):
                found[r["CapacityReservationId"]] = r
        except ClientError as e:
            if e.response.get("Error", {}).get("Code", "") in ACCESS_DENIED_CODES:
                raise
    out = []
    for p in plan.pools:
        if p.capacity_reservation_id:
            if p.capacity_reservation_id.startswith("cr-"):
                out.append(_reservation_check(p, found.get(p.capacity_reservation_id), now))
        elif p.purchase == "on-demand":
            out.append(_no_reservation_check(p, region))
    return out


def run_preflight(plan: Plan, region: str, clients: AwsClients, catalog: Catalog) -> PreflightReport:
    """Offerings per pool (live), each reservation or Capacity Block, and vCPU quotas at the plan's
    maximum scale, summed per quota."""
    types = sorted({p.instance_type for p in plan.pools})
    offered = fetch_offerings(clients.ec2(region), types)
    checks = [_offered_check(t, offered.get(t, []), region, catalog) for t in types]
    checks += capacity_checks(clients.ec2(region), plan, region)
    need: dict[str, int] = {}
    users: dict[str, list[str]] = {}
    types_by_quota: dict[str, set[str]] = {}
    missing_family: list[Check] = []
    families = quota_families(catalog)
    for p in plan.pools:
        inst = catalog.instance(p.instance_type)
        if p.purchase == "capacity-block":  # the block's own instances; its check is above
            continue
        # an ODCR's instances are on-demand instances and count toward the On-Demand vCPU quota
        name = quota_name_for(inst.family, "on-demand" if p.purchase == "reservation" else p.purchase, families)
        if name is None:
            missing_family.append(Check("quota", p.instance_type, [], "unknown",
                                        f"no vCPU quota known for family {inst.family} ({p.purchase}); "
                                        "add it to sizing/data/quota_families.csv"))
            continue
        need[name] = need.get(name, 0) + p.instances_max * inst.vcpus
        types_by_quota.setdefault(name, set()).add(p.instance_type)
        users.setdefault(name, []).append(f"{p.instances_max}× {p.instance_type} ({inst.vcpus} vCPU)")
    quotas: dict[str, Quota] = {}
    quota_error = ""
    try:
        quotas = fetch_vcpu_quotas(clients.quotas(region), set(need)) if need else {}
    except ClientError as e:  # access denied stays fatal (exit 2); anything else leaves quotas unknown
        code = e.response.get("Error", {}).get("Code", "")
        if code in ACCESS_DENIED_CODES:
            raise
        quota_error = f"; Service Quotas {e.operation_name} failed ({code})"
    for name, vcpus in need.items():
        types_here = ", ".join(sorted(types_by_quota[name]))
        q = quotas.get(name)
        if q is None:
            checks.append(Check("quota", types_here, [], "unknown",
                                f"quota {name!r} not found in Service Quotas (ec2, {region}){quota_error}; "
                                f"needs {vcpus} vCPUs",
                                quota_name=name, required_vcpus=vcpus))
            continue
        ok = vcpus <= q.value
        kind = "applied" if q.applied else "AWS default"
        detail = (f"{name} ({q.code}): needs {vcpus} vCPUs at maximum scale ({' + '.join(users[name])}); "
                  f"quota {q.value:g} ({kind})")
        checks.append(Check("quota", types_here, [], "pass" if ok else "fail", detail, quota_name=name,
                            quota_code=q.code, quota_vcpus=q.value, required_vcpus=vcpus,
                            fix=None if ok else increase_command(q.code, vcpus, region)))
    return PreflightReport(region, checks + missing_family)


def preflight_warnings(plan: Plan, region: str | None = None, clients: AwsClients | None = None,
                       catalog: Catalog | None = None) -> list[str]:
    """For `llmcap plan --preflight`: one warning line per check that did not pass (never raises
    for AWS access problems; those become a single warning)."""
    from sizing.catalog.lookup import load_catalog

    try:
        with aws_errors():
            report = run_preflight(plan, region or plan.region, clients or AwsClients.from_env(),
                                   catalog or load_catalog())
    except AwsAccessError as e:
        return [f"preflight skipped: {e.problems[0]}"]
    lines = []
    for c in report.checks:
        if c.status not in ("pass", "info"):  # `llmcap preflight` prints the notes
            lines.append(f"preflight {c.check} {c.status}: {c.detail}" + (f"; fix: {c.fix}" if c.fix else ""))
    return lines
