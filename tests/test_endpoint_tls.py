"""TLS on the endpoint by default (issue 32): the NLB listens on 443 only, with the ACM certificate the
stack names in `tls_certificate_arn`, or else one the deployment creates (a CA of its own, a server
certificate for the region's NLB names, imported into ACM; the CA is a stack output for the clients'
trust step). Plain HTTP only with `llmcap:deployment.allow_plain_http_endpoint: true`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sizing.deployment import DeploymentOptions
from tests import pulumi_harness as h
from tests.plan_factory import make_plan

ROOT = Path(__file__).resolve().parents[1]
ARN = "arn:aws:acm:us-east-1:111122223333:certificate/abc-123"


def test_the_opt_out_contradicts_a_certificate() -> None:
    with pytest.raises(ValueError, match="allow_plain_http_endpoint"):
        DeploymentOptions(allow_plain_http_endpoint=True, tls_certificate_arn=ARN)


def render_with(**deployment: object) -> Any:
    from sizing.stack import stack_from_config

    stack = stack_from_config("t", {"aws:region": "us-east-1", "llmcap:workload": {
        "model": "meta-llama/Meta-Llama-3-8B-Instruct", "prompt_tokens": 1024, "output_tokens": 512,
        "traffic": {"concurrent_users": 10}}, "llmcap:deployment": deployment}, "test")
    return h.render(stack, make_plan(stack="t"))


def router_service(result: Any) -> dict[str, Any]:
    return h.one(result, "kubernetes:core/v1:Service", "service-llmcap-router").inputs


def test_by_default_the_deployment_creates_a_certificate_and_serves_tls_only() -> None:
    result = render_with()
    acm = h.one(result, "aws:acm/certificate:Certificate", "llmcap-t-endpoint")
    svc = router_service(result)
    ann = svc["metadata"]["annotations"]
    assert ann["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] == acm.outputs["arn"]
    assert ann["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] == "443"
    assert [p["port"] for p in svc["spec"]["ports"]] == [443]
    leaf = h.one(result, "tls:index/locallySignedCert:LocallySignedCert", "llmcap-t-endpoint")
    assert set(leaf.inputs["allowedUses"]) == {"digital_signature", "key_encipherment", "server_auth"}
    csr = h.one(result, "tls:index/certRequest:CertRequest", "llmcap-t-endpoint")
    assert csr.inputs["dnsNames"] == ["*.elb.us-east-1.amazonaws.com"]  # every NLB name of the region
    ca = h.one(result, "tls:index/selfSignedCert:SelfSignedCert", "llmcap-t-endpoint-ca")
    assert ca.inputs["isCaCertificate"] is True
    assert result.outputs["endpoint"].startswith("https://")
    assert "endpointCaCertificate" in result.outputs


def test_a_named_certificate_creates_none() -> None:
    result = render_with(tls_certificate_arn=ARN)
    assert not [r for r in result.resources if r.type.startswith("tls:") or r.type.startswith("aws:acm/")]
    assert router_service(result)["metadata"]["annotations"][
        "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] == ARN
    assert "endpointCaCertificate" not in result.outputs


def test_plain_http_only_with_the_opt_out() -> None:
    result = render_with(allow_plain_http_endpoint=True)
    assert not [r for r in result.resources if r.type.startswith("tls:") or r.type.startswith("aws:acm/")]
    svc = router_service(result)
    assert [p["port"] for p in svc["spec"]["ports"]] == [80]
    assert "service.beta.kubernetes.io/aws-load-balancer-ssl-cert" not in svc["metadata"]["annotations"]
    assert result.outputs["endpoint"].startswith("http://")


def test_every_bundled_stack_serves_tls() -> None:
    for name in h.BUNDLED_STACKS:
        result = h.bundled(name)
        assert [p["port"] for p in router_service(result)["spec"]["ports"]] == [443], name


def test_the_security_doc_quotes_the_certificate_costs_of_the_data_file() -> None:
    ways = yaml.safe_load((ROOT / "infra" / "data" / "tls.yaml").read_text())["ways"]
    doc = (ROOT / "docs" / "security.md").read_text()
    for key, row in ways.items():
        cost = f"${row['usd_per_month']}" if row["usd_per_month"] == 0 else f"${row['usd_per_month']:,}/month"
        assert row["source"] and cost in doc, key
