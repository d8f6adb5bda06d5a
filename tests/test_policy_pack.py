"""The policy pack (policy/): every mandatory rule passes on the program's own rendered resources
for every bundled stack and fails, naming the resource, on a deliberately broken copy of one; the
advisory budget rule fires above `llmcap:budget_usd_month`; and policy/__main__.py starts a real
analyzer that reports the policies and judges resources over gRPC, as `pulumi preview
--policy-pack policy` would drive it."""

from __future__ import annotations

import copy
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from infra.config import exports
from infra.config.names import GPU_TAINT_KEY
from infra.kubernetes import router
from infra.kubernetes.k8s_common import API_KEY_SECRET
from infra.render import RenderResult, plain
from sizing.deployment import DeploymentOptions
from tests.k8s_support import ROOT, STACK_IDS, rendered

sys.path.insert(0, str(ROOT / "policy"))
rules = importlib.import_module("llmcap_policy.rules")

Res = Any  # llmcap_policy.rules.Resource (imported at run time from policy/)


def resources_of(result: RenderResult) -> list[Res]:
    """The rendered resources in the rules' form, plus the root stack resource carrying the stack
    outputs (the engine's AnalyzeStack sees it; the mock engine does not register it)."""
    out = [rules.Resource(r.type, r.name, plain(r.inputs),
                          frozenset(x for x in (r.id, r.outputs.get("bucket")) if isinstance(x, str)))
           for r in result.resources]
    out.append(rules.Resource(rules.STACK_TYPE, f"llmcap-{result.stack.name}", plain(result.outputs)))
    return out


@pytest.fixture(scope="session", params=STACK_IDS)
def stack_resources(request: pytest.FixtureRequest) -> tuple[str, list[Res]]:
    return request.param, resources_of(rendered(request.param)[0])


@pytest.fixture(scope="session")
def dev() -> list[Res]:
    return resources_of(rendered("dev")[0])


def pick(resources: list[Res], type_: str, name_part: str = "") -> Res:
    hits = [r for r in resources if r.type == type_ and name_part in r.name]
    assert hits, f"no {type_} named *{name_part}*; have {sorted(r.name for r in resources if r.type == type_)}"
    return hits[0]


def with_props(r: Res, props: dict[str, Any]) -> Res:
    return rules.Resource(r.type, r.name, props, r.ids, r.refs)


def violations(r: Res) -> dict[str, list[str]]:
    return rules.resource_violations(r.type, r.name, r.props)


# --- the program's own resources ------------------------------------------------------------------

def test_own_resources_pass_every_mandatory_rule(stack_resources: tuple[str, list[Res]]) -> None:
    stack, resources = stack_resources
    failed = {f"{r.type} {r.name}": v for r in resources if (v := violations(r))}
    assert failed == {}, f"{stack}: {failed}"
    assert rules.check_buckets_private_and_encrypted(resources) == [], stack


def test_rules_saw_what_they_guard(stack_resources: tuple[str, list[Res]]) -> None:
    """No vacuous pass: every stack has a GPU node group, a launch template, a bucket with its
    access block and encryption, a LoadBalancer Service and a vLLM server the rules examined."""
    stack, resources = stack_resources
    gpu_groups = [r for r in resources if r.type == rules.NODE_GROUP and rules.is_gpu_node_group(r.props)]
    system_groups = [r for r in resources if r.type == rules.NODE_GROUP and not rules.is_gpu_node_group(r.props)]
    # with provisioner: karpenter the GPU nodes come from NodePools, not managed node groups
    node_pools = [r for r in resources if r.type == "kubernetes:karpenter.sh/v1:NodePool"]
    assert (gpu_groups or node_pools) and system_groups, stack
    assert [r for r in resources if r.type == rules.LAUNCH_TEMPLATE], stack
    assert [r for r in resources if r.type in rules.BUCKETS], stack
    assert [r for r in resources if rules.load_balancer_scheme(r.props) and r.type == rules.SERVICE], stack
    servers = [r for r in resources if r.type in (rules.DEPLOYMENT, rules.LEADER_WORKER_SET)
               and any(rules._is_vllm(c) or rules._is_sglang(c) for pod in rules._serving_pod_specs(r.type, r.props)
                       for c in pod.get("containers", []))]
    assert servers, stack
    assert rules.planned_usd_per_month(resources) is not None, stack


def test_public_endpoint_the_program_builds_passes() -> None:
    """No bundled stack is public; the router's internet-facing Service, as the builder makes it, passes."""
    opts = DeploymentOptions(public_endpoint=True, tls_certificate_arn="arn:aws:acm:us-east-1:123456789012:"
                             "certificate/abc", endpoint_allowed_cidrs=["203.0.113.0/24"])
    svc = router.service("llmcap", opts)
    assert rules.load_balancer_scheme(svc) == "internet-facing"
    assert rules.check_public_endpoint_tls(rules.SERVICE, "router", svc) == []


def test_constants_agree_with_the_program() -> None:
    assert rules.GPU_TAINT_KEY == GPU_TAINT_KEY
    assert rules.LB_ANNOTATION == router.LB
    assert rules.USD_PER_MONTH_OUTPUT == exports.USD_PER_MONTH


# --- deliberately bad resources -------------------------------------------------------------------

def _untainted(r: Res) -> dict[str, Any]:
    return {**r.props, "taints": []}


def _prefer_no_schedule(r: Res) -> dict[str, Any]:
    return {**r.props, "taints": [{"key": GPU_TAINT_KEY, "value": "true", "effect": "PREFER_NO_SCHEDULE"}]}


def _tokens_optional(r: Res) -> dict[str, Any]:
    return {**r.props, "metadataOptions": {**r.props["metadataOptions"], "httpTokens": "optional"}}


def _hop_limit_2(r: Res) -> dict[str, Any]:
    return {**r.props, "metadataOptions": {**r.props["metadataOptions"], "httpPutResponseHopLimit": 2}}


def _no_metadata_options(r: Res) -> dict[str, Any]:
    return {k: v for k, v in r.props.items() if k != "metadataOptions"}


def _pab_partial(r: Res) -> dict[str, Any]:
    return {**r.props, "restrictPublicBuckets": False}


def _policy_public(r: Res) -> dict[str, Any]:
    doc = json.loads(r.props["policy"])
    doc["Statement"].append({"Sid": "PublicRead", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                             "Resource": "arn:aws:s3:::x/*"})
    return {**r.props, "policy": json.dumps(doc)}


def _bucket_public_acl(r: Res) -> dict[str, Any]:
    return {**r.props, "acl": "public-read"}


def _sse_empty(r: Res) -> dict[str, Any]:
    return {**r.props, "rules": []}


def _plain(p: dict[str, Any]) -> dict[str, Any]:
    """The Service without its TLS listener (the program's own has one by default, issue 32)."""
    for key in ("ssl-cert", "ssl-ports", "ssl-negotiation-policy"):
        p["metadata"]["annotations"].pop(rules.LB_ANNOTATION + key, None)
    p["spec"]["ports"] = [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]
    return p


def _internet_facing(r: Res) -> dict[str, Any]:
    p = _plain(copy.deepcopy(r.props))
    p["metadata"]["annotations"][rules.LB_ANNOTATION + "scheme"] = "internet-facing"
    return p


def _in_tree_default(r: Res) -> dict[str, Any]:
    """No scheme annotation and no AWS Load Balancer Controller class: the in-tree controller's
    default is internet-facing."""
    p = _plain(copy.deepcopy(r.props))
    del p["metadata"]["annotations"][rules.LB_ANNOTATION + "scheme"]
    del p["spec"]["loadBalancerClass"]
    return p


def _containers(p: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = p["spec"]
    pod = spec["template"]["spec"] if "template" in spec else spec["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    yield from pod["containers"]


def _no_api_key(r: Res) -> dict[str, Any]:
    p = copy.deepcopy(r.props)
    for c in _containers(p):
        c["env"] = [e for e in c["env"] if e["name"] != rules.API_KEY_ENV]
    return p


def _plain_api_key(r: Res) -> dict[str, Any]:
    p = copy.deepcopy(r.props)
    for c in _containers(p):
        c["env"] = [{"name": rules.API_KEY_ENV, "value": "sk-123"} if e["name"] == rules.API_KEY_ENV else e
                    for e in c["env"]]
    return p


def _api_key_in_args(r: Res) -> dict[str, Any]:
    p = copy.deepcopy(r.props)
    for c in _containers(p):
        c["args"] = [*c["args"], "--api-key", "sk-123"]
    return p


def _sglang_no_secret(r: Res) -> dict[str, Any]:
    p = copy.deepcopy(r.props)
    for c in _containers(p):
        c["env"] = [e for e in c["env"] if e["name"] != rules.SGLANG_API_KEY_ENV]
    return p


def _sglang_key_in_args(r: Res) -> dict[str, Any]:
    p = copy.deepcopy(r.props)
    for c in _containers(p):
        c["args"] = ["sk-123" if a == rules.SGLANG_API_KEY_ARG else a for a in c["args"]]
    return p


def _sglang_no_key_flag(r: Res) -> dict[str, Any]:
    p = copy.deepcopy(r.props)
    for c in _containers(p):
        i = c["args"].index("--api-key")
        c["args"] = c["args"][:i] + c["args"][i + 2:]
    return p


BAD = [  # (stack, type, name part, mutation, rule that must fail)
    ("dev", rules.NODE_GROUP, "g6e", _untainted, "gpu-node-group-tainted"),
    ("dev", rules.NODE_GROUP, "g6e", _prefer_no_schedule, "gpu-node-group-tainted"),
    ("llama405b", rules.NODE_GROUP, "p5", _untainted, "gpu-node-group-tainted"),
    ("dev", rules.LAUNCH_TEMPLATE, "g6e", _tokens_optional, "imdsv2-required"),
    ("dev", rules.LAUNCH_TEMPLATE, "system", _no_metadata_options, "imdsv2-required"),
    ("dev", rules.LAUNCH_TEMPLATE, "g6e", _hop_limit_2, "imds-hop-limit-1"),
    ("dev", rules.LAUNCH_TEMPLATE, "system", _hop_limit_2, "imds-hop-limit-1"),
    ("dev", rules.PUBLIC_ACCESS_BLOCK, "weights", _pab_partial, "s3-bucket-private"),
    ("dev", rules.BUCKET_POLICY, "weights", _policy_public, "s3-bucket-private"),
    ("dev", rules.BUCKETS[0], "weights", _bucket_public_acl, "s3-bucket-private"),
    ("dev", rules.SSE_CONFIGS[0], "weights", _sse_empty, "s3-encryption-configured"),
    ("dev", rules.SERVICE, "router", _internet_facing, "public-endpoint-tls"),
    ("dev", rules.SERVICE, "router", _in_tree_default, "public-endpoint-tls"),
    ("dev", rules.DEPLOYMENT, "vllm", _no_api_key, "vllm-api-key-from-secret"),
    ("dev", rules.DEPLOYMENT, "vllm", _plain_api_key, "vllm-api-key-from-secret"),
    ("dev", rules.DEPLOYMENT, "vllm", _api_key_in_args, "vllm-api-key-from-secret"),
    ("llama405b", rules.LEADER_WORKER_SET, "vllm", _no_api_key, "vllm-api-key-from-secret"),
    ("sglang", rules.DEPLOYMENT, "vllm", _sglang_no_secret, "vllm-api-key-from-secret"),
    ("sglang", rules.DEPLOYMENT, "vllm", _sglang_key_in_args, "vllm-api-key-from-secret"),
    ("sglang", rules.DEPLOYMENT, "vllm", _sglang_no_key_flag, "vllm-api-key-from-secret"),
]


@pytest.mark.parametrize(("stack", "type_", "name_part", "mutate", "rule"), BAD,
                         ids=[f"{b[4]}-{b[3].__name__.strip('_')}" for b in BAD])
def test_each_mandatory_rule_fails_on_a_bad_resource(stack: str, type_: str, name_part: str, mutate: Any,
                                                     rule: str) -> None:
    good = pick(resources_of(rendered(stack)[0]), type_, name_part)
    assert violations(good) == {}, good.name
    found = violations(with_props(good, mutate(good)))
    assert rule in found, f"{rule} did not fire on {good.name}: {found}"
    assert all(good.name in m for m in found[rule]), found[rule]


def test_a_system_node_group_needs_no_gpu_taint(dev: list[Res]) -> None:
    system = pick(dev, rules.NODE_GROUP, "system")
    assert rules.check_gpu_node_group_taint(system.type, system.name, _untainted(system)) == []
    as_gpu = {**_untainted(system), "amiType": "AL2023_x86_64_STANDARD", "instanceTypes": ["p4d.24xlarge"]}
    assert rules.check_gpu_node_group_taint(system.type, system.name, as_gpu)  # G/P family alone is enough


@pytest.mark.parametrize("drop", [rules.PUBLIC_ACCESS_BLOCK, rules.SSE_CONFIGS[0]])
def test_a_bucket_without_access_block_or_encryption_fails_the_stack_rule(dev: list[Res], drop: str) -> None:
    bucket = pick(dev, rules.BUCKETS[0], "weights")
    found = rules.check_buckets_private_and_encrypted([r for r in dev if r.type != drop])
    assert len(found) == 1 and bucket.name in found[0], found
    assert ("public access block" in found[0]) == (drop == rules.PUBLIC_ACCESS_BLOCK)


def test_the_stack_rule_links_by_engine_property_dependencies(dev: list[Res]) -> None:
    """In a preview the bucket's id is unknown; the engine's property dependency (a URN) links it."""
    urn = "urn:pulumi:dev::llmcap::aws:s3/bucket:Bucket::weights"
    unlinked = [r if r.type not in rules.BUCKETS else rules.Resource(r.type, r.name, r.props, frozenset({urn}))
                for r in dev]
    assert len(rules.check_buckets_private_and_encrypted(unlinked)) == 2
    linked = [rules.Resource(r.type, r.name, r.props, r.ids, {"bucket": frozenset({urn})})
              if r.type in (rules.PUBLIC_ACCESS_BLOCK, rules.SSE_CONFIGS[0]) else r for r in unlinked]
    assert rules.check_buckets_private_and_encrypted(linked) == []


def test_budget_rule_is_advisory_and_fires_above_the_budget(dev: list[Res]) -> None:
    name, usd = rules.planned_usd_per_month(dev)
    assert usd == rendered("dev")[0].plan.totals.usd_per_month
    above = rules.check_stack_budget(dev, usd / 2)
    assert len(above) == 1 and name in above[0] and rules.BUDGET_CONFIG_KEY in above[0]
    assert rules.check_stack_budget(dev, usd * 2) == []
    assert rules.check_stack_budget(dev, None) == []  # no budget set: nothing to judge


# --- the pack as the engine runs it ---------------------------------------------------------------

def _struct(props: dict[str, Any]) -> Any:
    from google.protobuf import struct_pb2

    s = struct_pb2.Struct()
    s.update(props)
    return s


@pytest.fixture(scope="module")
def analyzer() -> Iterator[Any]:
    """policy/__main__.py run as the engine runs it: constructing the PolicyPack starts the
    analyzer's gRPC server and prints its port. The stack config arrives as PULUMI_CONFIG."""
    grpc = pytest.importorskip("grpc")
    from pulumi.runtime.proto import analyzer_pb2_grpc

    env = {**os.environ, "PULUMI_CONFIG": json.dumps({rules.BUDGET_CONFIG_KEY: "1000"})}
    proc = subprocess.Popen([sys.executable, str(ROOT / "policy" / "__main__.py")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT / "policy")
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().decode().strip()
        if not port.isdigit():
            err = proc.stderr.read().decode() if proc.poll() is not None and proc.stderr else ""
            pytest.fail(f"no port from the policy pack: {port!r} {err}")
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_policy_pack_starts_and_lists_its_policies(analyzer: Any) -> None:
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import analyzer_pb2

    # the gRPC timeouts here are hang guards only (the pack answers in well under a second)
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    levels = {p.name: p.enforcementLevel for p in info.policies}
    assert info.name == "llmcap"
    mandatory = {r.name for r in rules.RESOURCE_RULES} | {"s3-bucket-has-access-block-and-encryption"}
    assert {n for n, lvl in levels.items() if lvl == analyzer_pb2.MANDATORY} == mandatory
    assert levels["gpu-budget"] == analyzer_pb2.ADVISORY


def test_policy_pack_judges_resources_over_grpc(analyzer: Any, dev: list[Res]) -> None:
    from pulumi.runtime.proto import analyzer_pb2

    lt = pick(dev, rules.LAUNCH_TEMPLATE, "g6e")
    ok = analyzer.Analyze(analyzer_pb2.AnalyzeRequest(type=lt.type, name=lt.name, urn=f"urn:x::{lt.name}",
                                                      properties=_struct(dict(lt.props))), timeout=30)
    assert list(ok.diagnostics) == []
    bad = analyzer.Analyze(analyzer_pb2.AnalyzeRequest(type=lt.type, name=lt.name, urn=f"urn:x::{lt.name}",
                                                       properties=_struct(_tokens_optional(lt))), timeout=30)
    assert [(d.policyName, d.enforcementLevel) for d in bad.diagnostics] == [("imdsv2-required",
                                                                             analyzer_pb2.MANDATORY)]
    assert lt.name in bad.diagnostics[0].message


def test_policy_pack_reads_the_budget_from_stack_config(analyzer: Any, dev: list[Res]) -> None:
    from pulumi.runtime.proto import analyzer_pb2

    stack = pick(dev, rules.STACK_TYPE)
    res = analyzer_pb2.AnalyzerResource(type=stack.type, name=stack.name, urn=f"urn:x::{stack.name}",
                                        properties=_struct({"usdPerMonth": stack.props["usdPerMonth"]}))
    found = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[res]), timeout=30)
    assert [(d.policyName, d.enforcementLevel) for d in found.diagnostics] == [("gpu-budget", analyzer_pb2.ADVISORY)]
    assert "$1,000/month" in found.diagnostics[0].message


def test_the_secret_the_rule_expects_is_the_programs(dev: list[Res]) -> None:
    vllm = pick(dev, rules.DEPLOYMENT, "vllm")
    env = {e["name"]: e for c in _containers(vllm.props) for e in c["env"]}
    assert env[rules.API_KEY_ENV]["valueFrom"]["secretKeyRef"]["name"] == API_KEY_SECRET
