"""Shared helpers for the AWS tests: one moto server per test session on a loopback port,
a dummy-credential environment, and botocore Stubbers for the APIs moto lacks (Pricing GetProducts,
Service Quotas for ec2). Stubbers check every request against the real service models."""

from __future__ import annotations

import atexit
import json
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from sizing.adapters.aws import ENDPOINT_ENV, pricing_filters

# The quota names AWS uses for GPU instance classes; codes are whatever the stubbed API says.
QUOTAS = [
    {"QuotaName": "Running On-Demand G and VT instances", "QuotaCode": "L-DB2E81BA", "Value": 64.0},
    {"QuotaName": "Running On-Demand P instances", "QuotaCode": "L-417A185B", "Value": 0.0},
    {"QuotaName": "All G and VT Spot Instance Requests", "QuotaCode": "L-3819A6DF", "Value": 64.0},
    {"QuotaName": "All P Spot Instance Requests", "QuotaCode": "L-7212CCBC", "Value": 0.0},
    {"QuotaName": "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "QuotaCode": "L-1216C47A",
     "Value": 1152.0},
]


@lru_cache(maxsize=1)
def moto_url() -> str:
    import os

    from moto.server import ThreadedMotoServer

    # skip moto's default AMI catalogue: it is large, and these tests never touch AMIs
    os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    atexit.register(server.stop)
    host, port = server.get_host_and_port()
    return f"http://{host}:{port}"


def set_dummy_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, endpoint: str | None) -> None:
    """Dummy credentials, no profile files, no instance metadata: nothing can reach real AWS."""
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ROLE_ARN",
              "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
              "AWS_CONTAINER_CREDENTIALS_FULL_URI", "LLMCAP_CATALOG_DIR"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    if endpoint:
        monkeypatch.setenv(ENDPOINT_ENV, endpoint)
    else:
        monkeypatch.delenv(ENDPOINT_ENV, raising=False)


def stub_client(service: str, region: str) -> tuple[Any, Stubber]:
    client = boto3.client(service, region_name=region, aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    return client, Stubber(client)


def price_list_entry(instance_type: str, region: str, usd: float, operation: str = "RunInstances",
                     marketoption: str = "OnDemand") -> str:
    """One GetProducts PriceList item, shaped like the real AmazonEC2 aws_v1 documents."""
    sku = f"SKU{zlib.crc32(f'{instance_type}|{region}|{operation}|{marketoption}'.encode()):010d}"
    return json.dumps({
        "product": {"productFamily": "Compute Instance", "sku": sku, "attributes": {
            "instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux", "tenancy": "Shared",
            "preInstalledSw": "NA", "capacitystatus": "Used", "operation": operation, "marketoption": marketoption,
            "licenseModel": "No License required"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {f"{sku}.JRTCKXETXF": {
            "offerTermCode": "JRTCKXETXF", "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z",
            "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "description": f"${usd} per On Demand Linux {instance_type} Instance Hour",
                "pricePerUnit": {"USD": f"{usd:.10f}"}, "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7"}}}}},
    })


def add_get_products(stubber: Stubber, instance_type: str, region: str, price_list: list[str]) -> None:
    stubber.add_response("get_products", {"PriceList": price_list, "FormatVersion": "aws_v1"},
                         {"ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1",
                          "Filters": pricing_filters(instance_type, region)})


def add_quota_pages(stubber: Stubber, applied: list[dict[str, Any]], defaults: list[dict[str, Any]] | None) -> None:
    """ListServiceQuotas in two pages (to exercise the paginator), then the defaults if asked."""
    def q(item: dict[str, Any]) -> dict[str, Any]:
        return {**item, "ServiceCode": "ec2", "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
                "Unit": "None", "Adjustable": True, "GlobalQuota": False}

    half = len(applied) // 2
    stubber.add_response("list_service_quotas", {"Quotas": [q(i) for i in applied[:half]], "NextToken": "t1"},
                         {"ServiceCode": "ec2"})
    stubber.add_response("list_service_quotas", {"Quotas": [q(i) for i in applied[half:]]},
                         {"ServiceCode": "ec2", "NextToken": "t1"})
    if defaults is not None:
        stubber.add_response("list_aws_default_service_quotas", {"Quotas": [q(i) for i in defaults]},
                             {"ServiceCode": "ec2"})


__all__ = ["ANY", "QUOTAS", "add_get_products", "add_quota_pages", "moto_url", "price_list_entry",
           "set_dummy_aws_env", "stub_client"]
