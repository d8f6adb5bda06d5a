"""Resource-level pricing of a Pulumi preview / `llmcap render` resources.json: prices are catalog
lookups, unpriceable resources say "not priced" (None), free plumbing is skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.catalog.lookup import load_catalog
from sizing.cost.money import HOURS_PER_MONTH
from sizing.cost.resources import load_resources, price_resources
from sizing.cost.resources.base import PricingContext, Resource
from sizing.errors import SpecError
from sizing.plan import CostLine
from tests.diff_support import cli_app, l4_plan
from tests.pulumi_harness import pins

URN = "urn:pulumi:dev::llmcap::{t}::{n}"


def _step(t: str, n: str, inputs: dict[str, object], op: str = "create", custom: bool = True) -> dict[str, object]:
    return {"op": op, "urn": URN.format(t=t, n=n),
            "newState": {"type": t, "urn": URN.format(t=t, n=n), "custom": custom, "inputs": inputs}}


def preview_doc() -> dict[str, object]:
    return {"steps": [
        _step("pulumi:pulumi:Stack", "llmcap-dev", {}, custom=False),
        _step("aws:eks/cluster:Cluster", "llm-eks", {"version": "1.31"}),
        _step("aws:eks/nodeGroup:NodeGroup", "gpu-g6-12xlarge",
              {"instanceTypes": ["g6.12xlarge"], "capacityType": "ON_DEMAND",
               "scalingConfig": {"minSize": 2, "desiredSize": 3, "maxSize": 6}}),
        _step("aws:eks/nodeGroup:NodeGroup", "system",
              {"instanceTypes": ["m6i.xlarge"], "diskSize": 50,
               "scalingConfig": {"minSize": 2, "desiredSize": 2, "maxSize": 3}}),
        _step("aws:ec2/natGateway:NatGateway", "nat-0", {}),
        _step("aws:ec2/eip:Eip", "nat-eip-0", {"domain": "vpc"}),
        _step("aws:ec2/vpc:Vpc", "vpc", {"cidrBlock": "10.0.0.0/16"}),
        _step("aws:ec2/launchTemplate:LaunchTemplate", "gpu-lt",
              {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": 200, "volumeType": "gp3"}}]}),
        _step("aws:lb/loadBalancer:LoadBalancer", "router", {"loadBalancerType": "network"}),
        _step("aws:s3/bucket:Bucket", "weights", {}),
        _step("aws:ec2/natGateway:NatGateway", "nat-gone", {}, op="delete"),
        _step("aws:sagemaker/endpoint:Endpoint", "mystery", {}),
    ]}


def _lines(tmp_path: Path) -> dict[str, CostLine]:
    p = tmp_path / "preview.json"
    p.write_text(json.dumps(preview_doc()))
    res = load_resources(p)
    assert {r.stack for r in res} == {"dev"} and "llmcap-dev" not in {r.name for r in res}
    return {ln.name: ln for ln in price_resources(res, PricingContext(load_catalog(), "us-east-1"))}


def test_priced_from_the_catalog(tmp_path: Path) -> None:
    cat = load_catalog()
    lines = _lines(tmp_path)
    gpu = lines["GPU instances (on-demand, g6.12xlarge)"]
    price = cat.price("g6.12xlarge", "us-east-1", "on-demand")
    assert price is not None
    assert gpu.quantity == 3 and gpu.usd_per_month == pytest.approx(3 * price.usd_per_hour * HOURS_PER_MONTH, abs=0.01)
    eks = cat.platform_price("EKS control plane (standard support)", "us-east-1").usd
    assert lines["EKS control plane"].usd_per_month == pytest.approx(eks * HOURS_PER_MONTH)
    nat = cat.platform_price("NAT gateway hourly", "us-east-1").usd
    assert lines["NAT gateways"].usd_per_month == pytest.approx(nat * HOURS_PER_MONTH)  # the deleted one is out
    assert lines["System nodes (on-demand, m6i.xlarge)"].usd_per_month is not None
    ip = cat.platform_price("Public IPv4 address", "us-east-1").usd
    assert lines["Public IPv4 addresses"].usd_per_month == pytest.approx(ip * HOURS_PER_MONTH)
    assert lines["Node root volumes (EBS gp3)"].usd_per_month == pytest.approx(
        cat.platform_price("EBS gp3 storage", "us-east-1").usd * round(100 * 2**30 / 1e9, 1), abs=0.01)


def test_unpriced_is_none_never_zero(tmp_path: Path) -> None:
    lines = _lines(tmp_path)
    for name in ("Load balancer (network, router)", "S3 bucket (weights)", "Node volumes (launch template gpu-lt)",
                 "aws:sagemaker/endpoint:Endpoint (mystery)", "NAT gateway data processing (nat-0)"):
        assert lines[name].usd_per_month is None, name
    assert not any(n.startswith("aws:ec2/vpc") for n in lines)  # free plumbing is skipped
    assert all(ln.usd_per_month is None or ln.usd_per_month > 0 for ln in lines.values())


def test_spot_gpu_without_price_and_unknown_size() -> None:
    ctx = PricingContext(load_catalog(), "us-east-1")
    (ln,) = price_resources([Resource("aws:eks/nodeGroup:NodeGroup", "x", {"instanceTypes": ["m6i.xlarge"],
                                                                             "capacityType": "SPOT"})], ctx)
    assert ln.usd_per_month is None  # no spot CPU price in the catalog, and no size known


def test_render_resources_list_and_bad_files(tmp_path: Path) -> None:
    p = tmp_path / "resources.json"
    p.write_text(json.dumps([{"type": "aws:eks/cluster:Cluster", "name": "c", "inputs": {}}]))
    (r,) = load_resources(p)
    assert r.type == "aws:eks/cluster:Cluster" and r.stack is None
    (tmp_path / "x.json").write_text('{"nope": 1}')
    with pytest.raises(SpecError):
        load_resources(tmp_path / "x.json")
    with pytest.raises(SpecError):
        load_resources(tmp_path / "missing.json")


def test_diff_shows_preview_resources(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(l4_plan(100).to_json())
    (tmp_path / "b.json").write_text(l4_plan(200).to_json())
    (tmp_path / "preview.json").write_text(json.dumps(preview_doc()))
    args = ["diff", "--from", str(tmp_path / "a.json"), "--to", str(tmp_path / "b.json")]
    r = CliRunner().invoke(cli_app(), args + ["--preview-json", str(tmp_path / "preview.json")],
                           env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.output
    assert "**Resources in the Pulumi program ($/month)**" in r.output and "5 not priced" in r.output
    assert "| Load balancer (network, router) | 1 load balancers | not priced |" in r.output
    r = CliRunner().invoke(cli_app(), args + ["--preview-json", f"prod={tmp_path / 'preview.json'}"])
    assert r.exit_code == 2 and "stack 'prod' is not in this diff" in r.output


def test_every_pricing_module_is_registered() -> None:
    """One module per priced type: each file in sizing/cost/resources/ with RESOURCE_TYPES is in the registry."""
    import importlib
    import pkgutil

    import sizing.cost.resources as pkg
    from sizing.cost.resources import registry
    from sizing.cost.resources.free import is_free

    reg = registry()
    for m in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"sizing.cost.resources.{m.name}")
        for t in getattr(mod, "RESOURCE_TYPES", ()):
            assert reg[t] is mod.price, t
            assert not is_free(t) or t.startswith("kubernetes:"), f"{t} is both priced and free"


@pytest.mark.slow
def test_rendered_program_is_priced(tmp_path: Path) -> None:
    """The real Pulumi program for the dev stack (offline render): node groups, EKS, NAT and IPs are
    priced from the catalog; the rest is known-free or shown as not priced by name."""
    pytest.importorskip("pulumi")
    render = pytest.importorskip("infra.render")
    from sizing.planning.planner import plan_for
    from sizing.stack import load_stack

    stack_file = Path(__file__).parents[1] / "stacks" / "Pulumi.dev.yaml"
    plan = plan_for(stack_file)
    result = pytest.importorskip("infra.program").render_stack(load_stack(stack_file), plan, load_catalog(),
                                                                   pins())
    p = tmp_path / "resources.json"
    p.write_text(json.dumps(render.resources_document(result)))
    lines = price_resources(load_resources(p), PricingContext(load_catalog(), plan.region))
    by = {ln.name: ln for ln in lines}
    for pool in plan.pools:
        gpu = by[f"GPU instances ({pool.purchase}, {pool.instance_type})"]
        assert gpu.quantity == pool.instances_desired
        assert gpu.usd_per_month == pytest.approx(pool.usd_per_hour * HOURS_PER_MONTH, rel=1e-3)
    assert by["EKS control plane"].usd_per_month is not None
    assert sum(1 for ln in lines if ln.name == "NAT gateways" and ln.usd_per_month) >= 1
    assert all(ln.usd_per_month is None or ln.usd_per_month > 0 for ln in lines)
