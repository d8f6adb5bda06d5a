"""The AWS fault suite of `llmcap catalog refresh` (issue 18 items 1 and 2), shared by
tests/test_aws_faults.py and bench/aws_faults.py.

A baseline cache is refreshed from a moto server (EC2) and Stubbed Pricing answers; each scenario
copies it, injects one fault (an empty or shrunken AWS answer, unreadable data, an AWS error, a
disk error or an interrupt while the new generation is written) and records what happened and
whether the cache directory is byte-identical afterwards (file contents, symlink targets, and no
leftover temporary directories)."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import boto3
from botocore.exceptions import ClientError, EndpointConnectionError

import sizing.adapters.aws as aws
from sizing.adapters.aws import AwsClients, aws_errors, instance_row, refresh_catalog
from sizing.catalog.lookup import Catalog
from sizing.catalog.paths import BUNDLED_DIR
from sizing.errors import LlmcapError
from tests.aws_support import add_get_products, moto_url, price_list_entry, stub_client

REGION = "us-east-1"


def _rows(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def kept_types() -> list[str]:
    """The GPU types refresh keeps from moto's us-east-1 data, in the order it prices them."""
    import moto

    cat = Catalog()
    bundled = {r["instance_type"] for r in _rows(BUNDLED_DIR / "instances.csv")}
    with gzip.open(Path(moto.__file__).parent / "ec2/resources/instance_types.json.gz") as f:
        data = json.load(f)
    out = []
    for it in data.values():
        row = instance_row(it, cat, {}, "x", "x") if it.get("GpuInfo") else None
        if row and (row["gpu"] in cat.gpus or row["instance_type"] in bundled):
            out.append(row["instance_type"])
    return sorted(out)


def bundled_prices() -> dict[str, float]:
    return {r["instance_type"]: float(r["usd_per_hour"]) for r in _rows(BUNDLED_DIR / "prices.csv")
            if r["region"] == REGION and r["purchase"] == "on-demand"}


def pricing_client(items: Callable[[str, float | None], list[str]] | None = None) -> Any:
    """A Stubbed Pricing client answering every kept type; `items(type, usd)` shapes each PriceList."""
    prices = bundled_prices()
    client, stub = stub_client("pricing", "us-east-1")
    for t in kept_types():
        usd = prices.get(t)
        pl = items(t, usd) if items else ([price_list_entry(t, REGION, usd)] if usd is not None else [])
        add_get_products(stub, t, REGION, pl)
    stub.activate()
    return client


def ec2_client(hooks: dict[str, Callable[..., Any]] | None = None) -> Any:
    """An EC2 client on the moto server; `hooks` maps "after-call.ec2.Op" / "before-call.ec2.Op" to handlers."""
    c = boto3.client("ec2", region_name=REGION, endpoint_url=moto_url(), aws_access_key_id="testing",
                     aws_secret_access_key="testing")
    for event, fn in (hooks or {}).items():
        c.meta.events.register(event, fn)
    return c


def snapshot(parent: Path) -> dict[str, str]:
    """Everything under `parent`: file digests, symlink targets, directories."""
    out: dict[str, str] = {}
    for p in sorted(parent.rglob("*")):
        rel = str(p.relative_to(parent))
        if p.is_symlink():
            out[rel] = "-> " + str(p.readlink())
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def make_baseline(tmp: Path) -> Path:
    """A refreshed cache `tmp/cache/catalog` (a symlink to its first generation)."""
    out = tmp / "cache" / "catalog"
    with aws_errors():
        refresh_catalog([REGION], out, AwsClients(injected={"ec2": ec2_client(), "pricing": pricing_client()}),
                        Catalog())
    return out


# --- faults -------------------------------------------------------------------------------
def _mutate(op: str, fn: Callable[[dict[str, Any]], None]) -> dict[str, Callable[..., Any]]:
    def handler(parsed: dict[str, Any], **_: Any) -> None:
        fn(parsed)
    return {f"after-call.ec2.{op}": handler}


def _raise(op: str, code: str, message: str = "") -> dict[str, Callable[..., Any]]:
    def handler(**_: Any) -> None:
        raise ClientError({"Error": {"Code": code, "Message": message}}, op)
    return {f"before-call.ec2.{op}": handler}


def _unreachable(op: str) -> dict[str, Callable[..., Any]]:
    def handler(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://ec2.us-east-1.example.invalid")
    return {f"before-call.ec2.{op}": handler}


def _drop_spot_price(parsed: dict[str, Any]) -> None:
    if parsed.get("SpotPriceHistory"):
        parsed["SpotPriceHistory"][0].pop("SpotPrice", None)


def _keep_offerings(n: int) -> Callable[[dict[str, Any]], None]:
    def fn(parsed: dict[str, Any]) -> None:
        parsed["InstanceTypeOfferings"] = parsed.get("InstanceTypeOfferings", [])[:n]
    return fn


@dataclass(frozen=True)
class Fault:
    name: str
    ec2_hooks: dict[str, Callable[..., Any]] | None = None
    price_items: Callable[[str, float | None], list[str]] | None = None
    patch: Callable[[], Any] | None = None  # a context manager factory wrapping the refresh
    allow_shrink: bool = False
    expect: str = ""  # text the one-line error must contain; "" = the refresh must succeed


def _fail_nth_write(n: int, exc: BaseException) -> Callable[[], Any]:
    real = aws._write
    calls = {"n": 0}

    def fake(path: Path, fields: list[str], rows: list[dict[str, str]]) -> None:
        calls["n"] += 1
        if calls["n"] == n:
            with path.open("w") as f:  # a half-written file, as a full disk leaves it
                f.write("instance_type,reg")
            raise exc
        real(path, fields, rows)

    @contextmanager
    def cm() -> Iterator[None]:
        calls["n"] = 0
        with mock.patch.object(aws, "_write", fake):
            yield
    return cm


def _fail_rename() -> Callable[[], Any]:
    @contextmanager
    def cm() -> Iterator[None]:
        with mock.patch.object(aws.os, "replace", side_effect=OSError(5, "Input/output error")):
            yield
    return cm


def _bad_usd(t: str, usd: float | None) -> list[str]:
    return [price_list_entry(t, REGION, usd or 1.0).replace(f'"USD": "{(usd or 1.0):.10f}"', '"USD": "abc"')]


FAULTS = [
    Fault("no GPU instance types (SCP / region not opted in)",
          _mutate("DescribeInstanceTypes", lambda p: p.__setitem__("InstanceTypes", [])),
          expect="GPU instance types: AWS returned none"),
    Fault("no AZ offerings", _mutate("DescribeInstanceTypeOfferings",
                                     lambda p: p.__setitem__("InstanceTypeOfferings", [])),
          expect="AZ offerings: AWS returned none"),
    Fault("offerings shrink to 1 row per page", _mutate("DescribeInstanceTypeOfferings", _keep_offerings(1)),
          expect="AZ offerings:"),
    Fault("no on-demand prices (wrong Pricing endpoint)", price_items=lambda t, usd: [],
          expect="on-demand prices:"),
    Fault("PriceList item not JSON", price_items=lambda t, usd: ["{not json"],
          expect="PriceList item 0 is unreadable"),
    Fault('PriceList "USD": "abc"', price_items=_bad_usd, expect="PriceList item 0 is unreadable"),
    Fault("spot record without SpotPrice", _mutate("DescribeSpotPriceHistory", _drop_spot_price),
          expect="has no usable SpotPrice"),
    Fault("InstanceTypes entry without InstanceType",
          _mutate("DescribeInstanceTypes", lambda p: [it.pop("InstanceType", None) for it in p["InstanceTypes"]]),
          expect="DescribeInstanceTypes (us-east-1) returned data llmcap cannot read"),
    Fault("UnauthorizedOperation on spot history", _raise("DescribeSpotPriceHistory", "UnauthorizedOperation"),
          expect="AWS access denied for DescribeSpotPriceHistory"),
    Fault("OptInRequired", _raise("DescribeInstanceTypes", "OptInRequired", "region not enabled"),
          expect="OptInRequired"),
    Fault("endpoint unreachable", _unreachable("DescribeInstanceTypeOfferings"), expect="cannot reach AWS"),
    Fault("disk full on the 2nd table", patch=_fail_nth_write(2, OSError(28, "No space left on device")),
          expect="cannot write the catalog cache"),
    Fault("interrupt (Ctrl-C) on the 3rd table", patch=_fail_nth_write(3, KeyboardInterrupt()),
          expect="KeyboardInterrupt"),
    Fault("rename of the generation fails", patch=_fail_rename(), expect="cannot write the catalog cache"),
    Fault("no offerings, --allow-shrink", _mutate("DescribeInstanceTypeOfferings",
                                                  lambda p: p.__setitem__("InstanceTypeOfferings", [])),
          allow_shrink=True),
]


@dataclass
class Outcome:
    fault: str
    result: str  # "refused" | "interrupted" | "written"
    message: str
    identical: bool
    ok: bool  # what the scenario expects happened


def run_fault(fault: Fault, baseline: Path, work: Path) -> Outcome:
    """Copy the baseline cache's parent to `work`, inject `fault`, refresh, compare."""
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(baseline.parent, work, symlinks=True)
    out = work / baseline.name
    before = snapshot(work)
    clients = AwsClients(injected={"ec2": ec2_client(fault.ec2_hooks), "pricing": pricing_client(fault.price_items)})
    ctx = fault.patch() if fault.patch else mock.patch.object(aws, "SPOT_WINDOW_DAYS", aws.SPOT_WINDOW_DAYS)
    result, message = "written", ""
    try:
        with ctx, aws_errors():
            refresh_catalog([REGION], out, clients, Catalog(), allow_shrink=fault.allow_shrink)
    except LlmcapError as e:
        result, message = "refused", e.problems[0]
        assert len(e.problems) == 1
    except KeyboardInterrupt:
        result, message = "interrupted", "KeyboardInterrupt"
    identical = snapshot(work) == before
    if fault.expect:
        ok = result != "written" and fault.expect in message and identical
    else:
        ok = result == "written" and not identical and Catalog(out.resolve()).instances != {}
    return Outcome(fault.name, result, message, identical, ok)


def table(outcomes: list[Outcome]) -> str:
    w = max(len(o.fault) for o in outcomes)
    lines = [f"{'fault injected':{w}}  {'result':11}  {'cache identical':15}  {'ok':3}  message",
             f"{'-' * w}  {'-' * 11}  {'-' * 15}  {'-' * 3}  {'-' * 40}"]
    for o in outcomes:
        lines.append(f"{o.fault:{w}}  {o.result:11}  {'yes' if o.identical else 'no':15}  "
                     f"{'yes' if o.ok else 'NO':3}  {o.message[:110]}")
    return "\n".join(lines)
