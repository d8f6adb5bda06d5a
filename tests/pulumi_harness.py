"""Run the Pulumi program under the mock engine for tests (the same path as `llmcap render`) and
look resources up by type, name and id, with failures that name the resource."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from infra.program import resource_prefix
from infra.render import RenderedResource, RenderResult, render_stack
from sizing.catalog import Catalog, load_catalog
from sizing.plan import Plan
from sizing.stack import Stack, load_stack

ROOT = Path(__file__).resolve().parent.parent
BUNDLED_STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
CLUSTER = "aws:eks/cluster:Cluster"
KMS_KEY = "aws:kms/key:Key"
BUCKET = "aws:s3/bucket:Bucket"
SECURITY_GROUP_TYPES = ("aws:ec2/securityGroup:SecurityGroup", "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup",
                        "aws:ec2/securityGroupRule:SecurityGroupRule",
                        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
WORLD = ("0.0.0.0/0", "::/0")


def catalog() -> Catalog:
    return load_catalog()


def render(stack: Stack, plan: Plan) -> RenderResult:
    return render_stack(stack, plan, catalog())


@cache
def bundled(name: str) -> RenderResult:
    """A bundled stack, planned by the planner and rendered (cached: one mocked run per stack)."""
    from sizing.planner import plan_stack

    stack = load_stack(ROOT / "stacks" / f"Pulumi.{name}.yaml")
    return render(stack, plan_stack(stack, catalog()))


def by_id(result: RenderResult) -> dict[str, RenderedResource]:
    return {r.id: r for r in result.resources if r.id}


def one(result: RenderResult, type_token: str, name: str) -> RenderedResource:
    found = [r for r in result.resources if r.type == type_token and r.name == name]
    if len(found) != 1:
        have = sorted(r.name for r in result.of_type(type_token))
        raise AssertionError(f"expected one {type_token} named {name!r}; have {have}")
    return found[0]


def gpu_node_group_name(result: RenderResult, pool_name: str) -> str:
    return f"{resource_prefix(result.stack)}-{pool_name}"


def referring(result: RenderResult, type_token: str, key: str, value: Any) -> list[RenderedResource]:
    return [r for r in result.of_type(type_token) if r.inputs.get(key) == value]


def world_open_ingress(resources: list[RenderedResource]) -> list[str]:
    """Names of security-group resources that admit 0.0.0.0/0 or ::/0 inbound."""
    bad = []
    for r in resources:
        if r.type not in SECURITY_GROUP_TYPES:
            continue
        i = r.inputs
        rules = list(i.get("ingress") or [])
        if r.type.endswith("securityGroupRule:SecurityGroupRule") and i.get("type") == "ingress":
            rules.append(i)
        if r.type.endswith("securityGroupIngressRule:SecurityGroupIngressRule"):
            rules.append({"cidrBlocks": [i.get("cidrIpv4")], "ipv6CidrBlocks": [i.get("cidrIpv6")]})
        for rule in rules:
            cidrs = list(rule.get("cidrBlocks") or []) + list(rule.get("ipv6CidrBlocks") or [])
            if any(c in WORLD for c in cidrs):
                bad.append(r.name)
    return bad


def policy(doc: str | dict[str, Any]) -> dict[str, Any]:
    return json.loads(doc) if isinstance(doc, str) else doc
