"""Offline render: run the program under Pulumi's mock engine (no credentials, no Pulumi CLI)
and write what it would create. `DIR/resources.json` lists every resource as
{"type", "name", "inputs"} with the engine's type tokens and camelCase property names, as in
`pulumi preview --json`; `DIR/outputs.json` holds the stack outputs.

Extension points: `WRITERS` (functions of a RenderResult and the output folder, each returning
the files it wrote) and `OUTPUT_HOOKS` (extra mock outputs per type token, e.g. a Service's
load-balancer hostname)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

if TYPE_CHECKING:
    from sizing.plan import Plan
    from sizing.stack import Stack

PROJECT = "llmcap"
MOCK_ACCOUNT = "123456789012"
REDACTED = "[secret]"
# the marker Pulumi's RPC layer puts on a secret value (pulumi.runtime.rpc._special_secret_sig)
_SECRET_SIG = "4dabf18193072939515e22adb298388d"


@dataclass
class RenderedResource:
    type: str
    name: str
    inputs: dict[str, Any]
    custom: bool
    id: str | None = None  # the mock physical id, which other resources' inputs refer to
    outputs: dict[str, Any] = field(default_factory=dict)  # what the mock provider returned


@dataclass
class RenderResult:
    stack: Stack
    plan: Plan
    resources: list[RenderedResource]
    outputs: dict[str, Any] = field(default_factory=dict)

    def of_type(self, type_token: str) -> list[RenderedResource]:
        return [r for r in self.resources if r.type == type_token]


def _short_hash(*parts: str, n: int = 8) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:n]


def _cluster_outputs(inputs: dict[str, Any], name: str, region: str) -> dict[str, Any]:
    return {"name": inputs.get("name") or f"{name}-{_short_hash(name, n=7)}",
            "endpoint": f"https://{_short_hash(name, n=32).upper()}.gr7.{region}.eks.amazonaws.com",
            "certificateAuthority": {"data": base64.b64encode(f"mock CA of {name}".encode()).decode()},
            "status": "ACTIVE",
            # EKS creates the cluster security group and returns its id in vpcConfig
            "vpcConfig": {**(inputs.get("vpcConfig") or {}), "clusterSecurityGroupId": f"sg-{_short_hash(name, n=17)}"}}


ARN_KINDS = {"aws:kms/key:Key": "key", "aws:eks/cluster:Cluster": "cluster", "aws:ec2/vpc:Vpc": "vpc",
             "aws:ec2/subnet:Subnet": "subnet", "aws:eks/nodeGroup:NodeGroup": "nodegroup"}

# extra outputs a real provider would return, per type token; the Kubernetes side may add its own
OUTPUT_HOOKS: dict[str, Callable[[dict[str, Any], str, str], dict[str, Any]]] = {
    "aws:eks/cluster:Cluster": _cluster_outputs,
    "aws:s3/bucket:Bucket": lambda i, n, r: {"bucket": i.get("bucket") or f"{n}-{_short_hash(n)}",
                                             "arn": f"arn:aws:s3:::{i.get('bucket') or f'{n}-{_short_hash(n)}'}"},
    "aws:ec2/launchTemplate:LaunchTemplate": lambda i, n, r: {"latestVersion": 1, "defaultVersion": 1},
    "aws:kms/key:Key": lambda i, n, r: {"keyId": _short_hash(n, n=32)},
    "aws:ec2/placementGroup:PlacementGroup": lambda i, n, r: {"name": i.get("name") or f"{n}-{_short_hash(n, n=7)}"},
    "aws:iam/role:Role": lambda i, n, r: {"name": i.get("name") or f"{n}-{_short_hash(n, n=7)}",
                                          "arn": f"arn:aws:iam::{MOCK_ACCOUNT}:role/{n}-{_short_hash(n, n=7)}"},
    # EKS backs each managed node group with one Auto Scaling group (tagged for the Cluster Autoscaler)
    "aws:eks/nodeGroup:NodeGroup": lambda i, n, r: {
        "nodeGroupName": i.get("nodeGroupName") or n,
        "resources": [{"autoscalingGroups": [{"name": f"eks-{n}-{_short_hash(n, n=12)}"}]}]},
    # the tls provider computes keys and certificates at `pulumi up` (infra/aws/endpoint_certificate.py)
    "tls:index/privateKey:PrivateKey": lambda i, n, r: {"privateKeyPem": f"(private key {n}, made at pulumi up)"},
    "tls:index/certRequest:CertRequest": lambda i, n, r: {"certRequestPem": f"(CSR {n}, made at pulumi up)"},
    "tls:index/selfSignedCert:SelfSignedCert": lambda i, n, r: {"certPem": f"(PEM of the CA {n}, made at pulumi up)"},
    "tls:index/locallySignedCert:LocallySignedCert": lambda i, n, r: {
        "certPem": f"(PEM of the certificate {n}, made at pulumi up)"},
    # the AWS Load Balancer Controller fills a LoadBalancer Service's status with the NLB's name
    "kubernetes:core/v1:Service": lambda i, n, r: {"status": {"loadBalancer": {"ingress": [
        {"hostname": f"k8s-{n[:20]}-{_short_hash(n, n=10)}.elb.{r}.amazonaws.com"}]}}}
    if (i.get("spec") or {}).get("type") == "LoadBalancer" else {},
}


class RecordingMocks(pulumi.runtime.Mocks):
    """Plausible ids, ARNs and provider outputs; records every registration."""

    def __init__(self, region: str) -> None:
        self.region = region
        self.resources: list[RenderedResource] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        rec = RenderedResource(args.typ, args.name, dict(args.inputs), bool(args.custom))
        self.resources.append(rec)
        if not args.custom:
            return None, {}
        module = args.typ.split(":")[1].split("/")[0] if args.typ.count(":") >= 2 else "x"
        rid = f"{args.name}-{_short_hash(args.typ, args.name)}"
        rec.id = rid
        kind = ARN_KINDS.get(args.typ, module)
        state: dict[str, Any] = {**args.inputs, "id": rid,
                                 "arn": f"arn:aws:{module}:{self.region}:{MOCK_ACCOUNT}:{kind}/{rid}"}
        hook = OUTPUT_HOOKS.get(args.typ)
        if hook:
            state.update(hook(args.inputs, args.name, self.region))
        rec.outputs = state
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:  # type: ignore[override]
        if args.token == "aws:index/getPartition:getPartition":
            return {"id": "aws", "partition": "aws", "dnsSuffix": "amazonaws.com",
                    "reverseDnsPrefix": "com.amazonaws"}
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"id": MOCK_ACCOUNT, "accountId": MOCK_ACCOUNT, "userId": "AIDAMOCK",
                    "arn": f"arn:aws:iam::{MOCK_ACCOUNT}:user/llmcap-render"}
        if args.token == "aws:index/getRegion:getRegion":
            return {"id": self.region, "name": self.region, "region": self.region}
        return {}


def run_mocked(stack: Stack, program: Callable[[], dict[str, Any]]) -> tuple[list[RenderedResource], dict]:
    """Run `program` under a fresh mock engine (Pulumi's runtime state is global) and wait for every
    registration; return the recorded resources and the resolved outputs."""
    mocks = RecordingMocks(stack.region)
    # Pulumi's sync helpers use the thread's current event loop; code that ran asyncio.run() before
    # (a CLI command, another test) leaves none or a closed one
    try:
        loop = asyncio.get_event_loop()
        if loop.is_closed():
            raise RuntimeError("closed")
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.settings.reset_options(project=PROJECT, stack=stack.name)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack.name, preview=False)
    outputs: dict[str, Any] = {}

    def body() -> None:
        outs = program()
        resolved: dict[str, Any] | None = _sync_await(pulumi.Output.from_input(outs).future())
        outputs.update(resolved or {})

    _sync_await(run_pulumi_func(body))
    return mocks.resources, outputs


def plain(value: Any) -> Any:
    """JSON-ready inputs: secrets redacted, integral floats as ints (the RPC layer sends numbers as
    floats), resource references as their URN."""
    if isinstance(value, dict):
        if _SECRET_SIG in value:
            return REDACTED
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return f"<{type(value).__name__}>"


def resources_document(result: RenderResult) -> list[dict[str, Any]]:
    rows = [{"type": r.type, "name": r.name, "inputs": plain(r.inputs)} for r in result.resources]
    return sorted(rows, key=lambda r: (r["type"], r["name"]))


def write_resources_json(result: RenderResult, out: Path) -> list[Path]:
    path = out / "resources.json"
    path.write_text(json.dumps(resources_document(result), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return [path]


def write_outputs_json(result: RenderResult, out: Path) -> list[Path]:
    path = out / "outputs.json"
    path.write_text(json.dumps(plain(result.outputs), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return [path]


def write_kubernetes_manifests(result: RenderResult, out: Path) -> list[Path]:
    """DIR/manifests/*.yaml (one Kubernetes object per file) and DIR/helm/*.yaml; see infra/kubernetes/manifests.py."""
    from infra.kubernetes.manifests import write_manifests

    return write_manifests(resources_document(result), out)


WRITERS: list[Callable[[RenderResult, Path], list[Path]]] = [write_resources_json, write_outputs_json,
                                                             write_kubernetes_manifests]


def write_render(result: RenderResult, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for writer in WRITERS:
        written.extend(writer(result, out))
    return written
