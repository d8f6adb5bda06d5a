"""Run the Pulumi program under the mock engine for tests (the same path as `llmcap render`) and
look resources up by type, name and id, with failures that name the resource."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from infra.config.image_lock import ImagePins, resolve_pins
from infra.karpenter.nodes import karpenter_pools
from infra.program import render_stack, resource_prefix
from infra.render import RenderedResource, RenderResult
from sizing.catalog.lookup import Catalog, load_catalog
from sizing.plan import Plan, Pool
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


def pins() -> ImagePins:
    """The image digests of stacks/images.lock.json where it has them, else tags (as a stack with
    llmcap:deployment.allow_unpinned_images deploys them)."""
    return resolve_pins(ROOT / "stacks" / "Pulumi.dev.yaml", allow_unpinned=True)


def render(stack: Stack, plan: Plan) -> RenderResult:
    return render_stack(stack, plan, catalog(), pins())


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


def node_group_pools(result: RenderResult) -> list[Pool]:
    """The plan pools that get a managed node group (not those Karpenter launches, infra/karpenter/nodes.py)."""
    on_karpenter = karpenter_pools(result.stack.deployment.provisioner, result.plan.pools)
    return [p for p in result.plan.pools if p not in on_karpenter]


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


# --- what the program asks the engine for: parents, aliases, options ------------------------------

@dataclass(frozen=True)
class Registration:
    """One RegisterResource request as the engine receives it (pulumi/proto resource.proto), with the
    URN the mock monitor gave it. `parent` is the parent's mock URN ("" for none)."""

    mock_urn: str
    type: str
    name: str
    parent: str
    custom: bool
    aliases: tuple[Any, ...]  # pulumi.runtime.proto.alias_pb2.Alias (a spec or a full URN)
    dependencies: tuple[str, ...]  # mock URNs this resource waits for
    ignore_changes: tuple[str, ...]
    timeouts: tuple[str, str]  # customTimeouts (create, update); "" where unset


def registrations(stack: Stack, plan: Plan) -> list[Registration]:
    """Render `stack` under the mock engine and return every RegisterResource request, in order."""
    from unittest import mock

    from pulumi.runtime import mocks

    recorded: list[Registration] = []
    real = mocks.MockMonitor.RegisterResource

    def recording(self: Any, request: Any) -> Any:
        response = real(self, request)
        t = request.customTimeouts
        recorded.append(Registration(
            mock_urn=response.urn, type=request.type, name=request.name, parent=request.parent,
            custom=bool(request.custom), aliases=tuple(request.aliases), dependencies=tuple(request.dependencies),
            ignore_changes=tuple(request.ignoreChanges), timeouts=(t.create, t.update)))
        return response

    with mock.patch.object(mocks.MockMonitor, "RegisterResource", recording):
        render(stack, plan)
    return recorded


def _urn(stack: str, project: str, qualified_type: str, name: str) -> str:
    return f"urn:pulumi:{stack}::{project}::{qualified_type}::{name}"


def _qualified_type(urn: str) -> str:
    return urn.split("::")[2]


class EngineUrns:
    """URNs as the Pulumi engine computes them (pulumi/pulumi pkg/resource/deploy/deployment.go
    `generateURN`: the parent's whole qualified type, `$`-joined, before the resource's type; the
    root Stack's type is left out). The mock monitor keeps only the parent's last type
    (pulumi/runtime/mocks.py `make_urn`), so two levels of components need this."""

    def __init__(self, regs: list[Registration], stack: str, project: str) -> None:
        self.stack, self.project = stack, project
        self.by_mock = {r.mock_urn: r for r in regs}
        if len(self.by_mock) != len(regs):
            raise AssertionError("two registrations share a mock URN")
        self._urn: dict[str, str] = {}

    def urn(self, r: Registration) -> str:
        if r.mock_urn not in self._urn:
            parent = self.by_mock.get(r.parent)
            qualified = r.type if parent is None or parent.type == "pulumi:pulumi:Stack" else \
                f"{_qualified_type(self.urn(parent))}${r.type}"
            self._urn[r.mock_urn] = _urn(self.stack, self.project, qualified, r.name)
        return self._urn[r.mock_urn]

    def alias_urns(self, r: Registration) -> list[str]:
        """What each of `r`'s aliases names, resolved as the engine resolves an alias spec
        (pkg/resource/deploy: empty name/type/stack/project default to the resource's own; `parentUrn`
        or `noParent`, else the resource's current parent)."""
        out = []
        for a in r.aliases:
            if a.HasField("urn"):
                out.append(a.urn)
                continue
            s = a.spec
            name, typ = s.name or r.name, s.type or r.type
            if s.noParent:
                parent = None
            elif s.parentUrn:
                parent = self.by_mock.get(s.parentUrn)
                if parent is None:
                    raise AssertionError(f"{r.type} {r.name}: alias parent {s.parentUrn} was never registered")
            else:
                parent = self.by_mock.get(r.parent)
            qualified = typ if parent is None or parent.type == "pulumi:pulumi:Stack" else \
                f"{_qualified_type(self.urn(parent))}${typ}"
            out.append(_urn(s.stack or self.stack, s.project or self.project, qualified, name))
        return out
