"""Run the Pulumi program under the mock engine for tests (the same path as `llmcap render`) and
look resources up by type, name and id, with failures that name the resource."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from infra.program import resource_prefix
from infra.render import RenderedResource, RenderResult, render_stack
from sizing.catalog.lookup import Catalog, load_catalog
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
    from sizing.planning.planner import plan_stack

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


# --- the Pulumi program file itself, as the Pulumi CLI runs it -----------------------------------

def _as_go_json(value: Any) -> Any:
    """YAML values as the Pulumi CLI (Go encoding/json) writes them: a float64 with no fraction,
    such as `0.0`, comes out as `0`."""
    if isinstance(value, dict):
        return {k: _as_go_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_go_json(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def cli_config(project_dir: Path, stack: str, secrets: dict[str, str] | None = None) -> dict[str, str]:
    """What the Pulumi CLI hands the program as config for `-s stack`: every key of
    `stackConfigDir`/Pulumi.<stack>.yaml (pulumi/pulumi sdk/go/common/workspace/paths.go
    `ProjectStackPath`), objects and lists as JSON text, scalars as text; `secrets` are the values
    `pulumi config set --secret` stored, decrypted (the CLI decrypts them before the run)."""
    import yaml

    project = yaml.safe_load((project_dir / "Pulumi.yaml").read_text()) or {}
    path = project_dir / str(project.get("stackConfigDir") or ".") / f"Pulumi.{stack}.yaml"
    config = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
    out: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            continue  # ciphertext: supplied decrypted through `secrets`
        if isinstance(value, (dict, list)):
            out[key] = json.dumps(_as_go_json(value))
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    out.update(secrets or {})
    return out


def run_program_file(project_dir: Path, stack: str, secrets: dict[str, str] | None = None
                     ) -> tuple[list[RenderedResource], dict[str, Any]]:
    """Run `project_dir`/infra/__main__.py (Pulumi.yaml `main: infra/`) for `-s stack` under the mock
    engine with the config the CLI would pass: what `pulumi preview -s stack` would register.
    Returns the resources and the exported stack outputs; a `pulumi.RunError` propagates."""
    import runpy
    import sys
    import types

    import pulumi
    import pulumi.runtime.config as runtime_config

    from infra.render import run_mocked

    config = cli_config(project_dir, stack, secrets)
    exported: dict[str, Any] = {}

    def program() -> dict[str, Any]:
        runtime_config.set_all_config(config, sorted(secrets or {}))
        real_export = pulumi.export
        pulumi.export = lambda name, value: exported.__setitem__(name, value)  # no root Stack under mocks
        saved_path = list(sys.path)
        try:
            runpy.run_path(str(project_dir / "infra" / "__main__.py"), run_name="__main__")
        finally:
            pulumi.export = real_export
            sys.path[:] = saved_path
        return dict(exported)

    region = json.loads(json.dumps(config.get("aws:region", "us-east-1")))
    fake_stack = types.SimpleNamespace(name=stack, region=region)
    resources, outputs = run_mocked(fake_stack, program)  # type: ignore[arg-type]
    return resources, outputs
