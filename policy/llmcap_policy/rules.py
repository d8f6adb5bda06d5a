"""The llmcap policy rules as plain functions over resources ({type, name, props} in the engine's
form: type tokens and camelCase property names), so tests run them on rendered stacks without the
Pulumi engine. policy/llmcap_policy/pack.py wraps them as pulumi_policy policies.

Each check returns a list of violation messages; every message names the resource. Props may be
pulumi_policy's unknown-checking proxies (Mapping/Sequence, not dict/list), so the checks only use
the Mapping and Sequence protocols. This module imports neither pulumi nor llmcap: the pack runs in
its own virtualenv. The constants mirror infra/config/names.py and infra/kubernetes/router.py (a test keeps them equal).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

GPU_TAINT_KEY = "nvidia.com/gpu"
NO_SCHEDULE = ("NO_SCHEDULE", "NoSchedule")  # EKS API form, Kubernetes form
API_KEY_ENV = "VLLM_API_KEY"
# SGLang reads its key only from --api-key: the pod passes the Kubernetes expansion of a Secret-backed env
# var, never the key itself (infra/kubernetes/sglang_args.py)
SGLANG_API_KEY_ENV = "SGLANG_API_KEY"
SGLANG_API_KEY_ARG = f"$({SGLANG_API_KEY_ENV})"
LB_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-"
AWS_NLB_CLASS = "service.k8s.aws/nlb"
STACK_TYPE = "pulumi:pulumi:Stack"
USD_PER_MONTH_OUTPUT = "usdPerMonth"  # infra/config/exports.py USD_PER_MONTH: GPU instances at desired size
BUDGET_CONFIG_KEY = "llmcap:budget_usd_month"

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
SSE_CONFIGS = ("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
               "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2")
BUCKET_ACLS = ("aws:s3/bucketAcl:BucketAcl", "aws:s3/bucketAclV2:BucketAclV2")
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
SERVICE = "kubernetes:core/v1:Service"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
LEADER_WORKER_SET = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"

PAB_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
PUBLIC_CANNED_ACLS = ("public-read", "public-read-write", "authenticated-read")
PUBLIC_GRANTEES = ("http://acs.amazonaws.com/groups/global/AllUsers",
                   "http://acs.amazonaws.com/groups/global/AuthenticatedUsers")
SSE_ALGORITHMS = ("AES256", "aws:kms", "aws:kms:dsse")
# G and P instance families carry NVIDIA GPUs (g4ad carries AMD; it still wants the taint)
GPU_INSTANCE = re.compile(r"^(g|gr|p)\d")


@dataclass(frozen=True)
class Resource:
    """One resource as a policy sees it. `ids`: the physical ids and names other resources use to
    refer to it (a bucket's id and name) and its URN; `refs`: property name -> URNs the property
    depends on (the engine's property dependencies; empty in the offline render)."""

    type: str
    name: str
    props: Mapping[str, Any]
    ids: frozenset[str] = frozenset()
    refs: Mapping[str, frozenset[str]] = field(default_factory=dict)


def _seq(value: Any) -> list[Any]:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return []


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# --- GPU node groups ------------------------------------------------------------------------------

def is_gpu_node_group(props: Mapping[str, Any]) -> bool:
    ami = str(props.get("amiType") or "").upper()
    if "NVIDIA" in ami or "GPU" in ami:
        return True
    return any(GPU_INSTANCE.match(str(t)) for t in _seq(props.get("instanceTypes")))


def check_gpu_node_group_taint(type_: str, name: str, props: Mapping[str, Any]) -> list[str]:
    if type_ != NODE_GROUP or not is_gpu_node_group(props):
        return []
    for t in _seq(props.get("taints")):
        t = _map(t)
        if t.get("key") == GPU_TAINT_KEY and t.get("effect") in NO_SCHEDULE:
            return []
    return [f"GPU node group '{name}' has no `{GPU_TAINT_KEY}` NoSchedule taint: pods that do not need "
            f"a GPU would be scheduled onto GPU nodes"]


# --- IMDSv2 ---------------------------------------------------------------------------------------

def check_imdsv2(type_: str, name: str, props: Mapping[str, Any]) -> list[str]:
    if type_ not in (LAUNCH_TEMPLATE, INSTANCE):
        return []
    tokens = _map(props.get("metadataOptions")).get("httpTokens")
    if tokens == "required":
        return []
    kind = "launch template" if type_ == LAUNCH_TEMPLATE else "instance"
    return [f"{kind} '{name}' does not require IMDSv2 (metadataOptions.httpTokens is {tokens!r}, "
            f"must be 'required')"]


# EC2 user guide, "Configure the instance metadata options" / EKS best practices "Restrict access to the
# instance profile assigned to the worker node": with IMDSv2 and a PUT response hop limit of 1, a
# container that is not on the host network cannot get a token, so pods cannot use the node role.
IMDS_HOP_LIMIT = 1


def check_imds_hop_limit(type_: str, name: str, props: Mapping[str, Any]) -> list[str]:
    if type_ not in (LAUNCH_TEMPLATE, INSTANCE):
        return []
    hops = _map(props.get("metadataOptions")).get("httpPutResponseHopLimit")
    if hops == IMDS_HOP_LIMIT:
        return []
    kind = "launch template" if type_ == LAUNCH_TEMPLATE else "instance"
    return [f"{kind} '{name}' lets pods reach IMDS and the node role (metadataOptions.httpPutResponseHopLimit "
            f"is {hops!r}, must be {IMDS_HOP_LIMIT}; pods use EKS Pod Identity)"]


# --- S3: private ------------------------------------------------------------------------------------

def _policy_document(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    try:
        doc = json.loads(str(value))
    except ValueError:
        return {}
    return doc if isinstance(doc, Mapping) else {}


def _public_principal(principal: Any) -> bool:
    if principal == "*":
        return True
    return any(p == "*" for p in _seq(_map(principal).get("AWS")) + [_map(principal).get("AWS")])


def check_bucket_private(type_: str, name: str, props: Mapping[str, Any]) -> list[str]:
    """The public access block sets all four flags; no public canned ACL or grant; no bucket policy
    statement that allows everyone without a condition."""
    out: list[str] = []
    if type_ == PUBLIC_ACCESS_BLOCK:
        off = [f for f in PAB_FLAGS if props.get(f) is not True]
        if off:
            out.append(f"public access block '{name}' does not set {', '.join(off)} to true")
    if type_ in BUCKETS + BUCKET_ACLS and props.get("acl") in PUBLIC_CANNED_ACLS:
        out.append(f"bucket '{name}' has the public canned ACL {props.get('acl')!r}")
    if type_ in BUCKET_ACLS:
        for grant in _seq(_map(props.get("accessControlPolicy")).get("grants")):
            uri = _map(_map(grant).get("grantee")).get("uri")
            if uri in PUBLIC_GRANTEES:
                out.append(f"bucket ACL '{name}' grants access to {uri}")
    if type_ == BUCKET_POLICY or (type_ in BUCKETS and props.get("policy")):
        for st in _seq(_policy_document(props.get("policy")).get("Statement")):
            st = _map(st)
            if st.get("Effect") == "Allow" and _public_principal(st.get("Principal")) and not st.get("Condition"):
                out.append(f"bucket policy '{name}' allows everyone (Principal '*') without a condition "
                           f"(statement {st.get('Sid') or '?'})")
    return out


def check_sse_configuration(type_: str, name: str, props: Mapping[str, Any]) -> list[str]:
    if type_ not in SSE_CONFIGS:
        return []
    algos = [_map(_map(r).get("applyServerSideEncryptionByDefault")).get("sseAlgorithm")
             for r in _seq(props.get("rules"))]
    if not algos or any(a not in SSE_ALGORITHMS for a in algos):
        return [f"server-side encryption configuration '{name}' has no default encryption rule with one of "
                f"{', '.join(SSE_ALGORITHMS)} (got {algos})"]
    return []


def _refers_to(res: Resource, prop: str, target: Resource) -> bool:
    value = res.props.get(prop)
    if isinstance(value, str) and value in target.ids:
        return True
    return bool(res.refs.get(prop, frozenset()) & target.ids)


def check_buckets_private_and_encrypted(resources: Iterable[Resource]) -> list[str]:
    """Stack-wide: every bucket has a public access block with all four flags and a server-side
    encryption configuration (a separate resource, or the bucket's inline one)."""
    rs = list(resources)
    out: list[str] = []
    for b in (r for r in rs if r.type in BUCKETS):
        pabs = [r for r in rs if r.type == PUBLIC_ACCESS_BLOCK and _refers_to(r, "bucket", b)]
        if not any(all(p.props.get(f) is True for f in PAB_FLAGS) for p in pabs):
            out.append(f"bucket '{b.name}' has no public access block that sets {', '.join(PAB_FLAGS)}")
        inline = _map(b.props.get("serverSideEncryptionConfiguration"))
        sses = [r for r in rs if r.type in SSE_CONFIGS and _refers_to(r, "bucket", b)]
        if not inline and not any(not check_sse_configuration(s.type, s.name, s.props) for s in sses):
            out.append(f"bucket '{b.name}' has no server-side encryption configuration")
    return out


# --- public inference endpoint ---------------------------------------------------------------------

def load_balancer_scheme(props: Mapping[str, Any]) -> str | None:
    """`internet-facing`, `internal`, or None when the Service is no LoadBalancer. Without a scheme
    annotation the AWS Load Balancer Controller (loadBalancerClass service.k8s.aws/nlb) makes an
    internal NLB; the in-tree controller makes an internet-facing one."""
    spec = _map(props.get("spec"))
    if spec.get("type") != "LoadBalancer":
        return None
    ann = _map(_map(props.get("metadata")).get("annotations"))
    scheme = ann.get(LB_ANNOTATION + "scheme")
    if scheme in ("internet-facing", "internal"):
        return str(scheme)
    if str(ann.get(LB_ANNOTATION + "internal", "")).lower() in ("true", "0.0.0.0/0"):
        return "internal"
    return "internal" if spec.get("loadBalancerClass") == AWS_NLB_CLASS else "internet-facing"


def check_public_endpoint_tls(type_: str, name: str, props: Mapping[str, Any]) -> list[str]:
    if type_ != SERVICE or load_balancer_scheme(props) != "internet-facing":
        return []
    ann = _map(_map(props.get("metadata")).get("annotations"))
    out = []
    if not ann.get(LB_ANNOTATION + "ssl-cert"):
        out.append(f"Service '{name}' is an internet-facing load balancer without a TLS certificate "
                   f"(annotation {LB_ANNOTATION}ssl-cert)")
    # the controller terminates TLS on the ports listed in ssl-ports, on every port when it is unset
    tls_ports = [x.strip() for x in str(ann.get(LB_ANNOTATION + "ssl-ports") or "*").split(",")]
    plain = [str(_map(p).get("port")) for p in _seq(_map(props.get("spec")).get("ports"))
             if "*" not in tls_ports and str(_map(p).get("port")) not in tls_ports
             and str(_map(p).get("name")) not in tls_ports]
    if ann.get(LB_ANNOTATION + "ssl-cert") and plain:
        out.append(f"Service '{name}' is internet-facing and also listens without TLS on port(s) {', '.join(plain)}")
    return out


def _is_vllm(container: Mapping[str, Any]) -> bool:
    words = [str(container.get("image") or "")] + [str(c) for c in _seq(container.get("command"))]
    return any("vllm-openai" in w or w == "vllm" for w in words)


def _is_sglang(container: Mapping[str, Any]) -> bool:
    words = [str(container.get("image") or "")] + [str(c) for c in _seq(container.get("command"))]
    return any("lmsysorg/sglang" in w or w == "sglang.launch_server" for w in words)


def _serving_pod_specs(type_: str, props: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = _map(props.get("spec"))
    if type_ == DEPLOYMENT:
        return [_map(_map(spec.get("template")).get("spec"))]
    if type_ == LEADER_WORKER_SET:  # the leader serves HTTP; headless workers take no requests
        return [_map(_map(_map(spec.get("leaderWorkerTemplate")).get("leaderTemplate")).get("spec"))]
    return []


def _sglang_api_key(type_: str, name: str, c: Mapping[str, Any], env: Mapping[str, Mapping[str, Any]],
                    args: list[str]) -> list[str]:
    """An SGLang server: `--api-key $(SGLANG_API_KEY)` and SGLANG_API_KEY from a Secret; any other value after
    --api-key is a key written into the pod spec."""
    kind, who = type_.rsplit(":", 1)[-1], c.get("name")
    given = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--api-key"]
    if not given:
        return [f"{kind} '{name}' container '{who}' serves SGLang without --api-key ({SGLANG_API_KEY_ARG})"]
    if any(v != SGLANG_API_KEY_ARG for v in given):
        return [f"{kind} '{name}' container '{who}' passes an SGLang API key in plain args; pass "
                f"--api-key {SGLANG_API_KEY_ARG} with {SGLANG_API_KEY_ENV} from a Secret"]
    key = env.get(SGLANG_API_KEY_ENV, {})
    if not _map(_map(key.get("valueFrom")).get("secretKeyRef")).get("name"):
        return [f"{kind} '{name}' container '{who}' serves SGLang without an API key from a Secret "
                f"({SGLANG_API_KEY_ENV} with valueFrom.secretKeyRef)"]
    return []


def check_vllm_api_key(type_: str, name: str, props: Mapping[str, Any]) -> list[str]:
    """Every vLLM server container takes its API key from a Secret (VLLM_API_KEY with
    secretKeyRef); a key in plain args or a plain env value is a leaked secret."""
    out = []
    for pod in _serving_pod_specs(type_, props):
        for c in (_map(c) for c in _seq(pod.get("containers"))):
            env = {str(_map(e).get("name")): _map(e) for e in _seq(c.get("env"))}
            args = [str(a) for a in _seq(c.get("args"))]
            if _is_sglang(c):
                out += _sglang_api_key(type_, name, c, env, args)
                continue
            if not _is_vllm(c):
                continue
            key = env.get(API_KEY_ENV, {})
            if "--api-key" in args:
                out.append(f"{type_.rsplit(':', 1)[-1]} '{name}' container '{c.get('name')}' passes --api-key "
                           f"in plain args; take it from a Secret through {API_KEY_ENV}")
            elif not _map(_map(key.get("valueFrom")).get("secretKeyRef")).get("name"):
                out.append(f"{type_.rsplit(':', 1)[-1]} '{name}' container '{c.get('name')}' serves vLLM "
                           f"without an API key from a Secret ({API_KEY_ENV} with valueFrom.secretKeyRef)")
    return out


# --- budget (advisory) ------------------------------------------------------------------------------

def check_budget(usd_per_month: float | None, budget_usd_month: float | None, stack: str = "stack") -> list[str]:
    if usd_per_month is None or budget_usd_month is None:
        return []
    if usd_per_month > budget_usd_month:
        return [f"{stack}: planned GPU cost ${usd_per_month:,.0f}/month is above "
                f"{BUDGET_CONFIG_KEY} ${budget_usd_month:,.0f}/month"]
    return []


def planned_usd_per_month(resources: Iterable[Resource]) -> tuple[str, float] | None:
    """The plan's monthly GPU cost from the root stack resource's outputs (`usdPerMonth`)."""
    for r in resources:
        value = r.props.get(USD_PER_MONTH_OUTPUT) if r.type == STACK_TYPE else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return r.name, float(value)
    return None


def check_stack_budget(resources: Iterable[Resource], budget_usd_month: float | None) -> list[str]:
    found = planned_usd_per_month(resources)
    return check_budget(found[1], budget_usd_month, found[0]) if found else []


# --- registry ----------------------------------------------------------------------------------------

ResourceCheck = Callable[[str, str, Mapping[str, Any]], list[str]]


@dataclass(frozen=True)
class ResourceRule:
    name: str
    description: str
    check: ResourceCheck


RESOURCE_RULES: tuple[ResourceRule, ...] = (
    ResourceRule("gpu-node-group-tainted",
                 f"GPU node groups carry the `{GPU_TAINT_KEY}` NoSchedule taint.", check_gpu_node_group_taint),
    ResourceRule("s3-bucket-private",
                 "S3 public access blocks set all four flags; no public ACL or public bucket policy.",
                 check_bucket_private),
    ResourceRule("s3-encryption-configured",
                 "S3 server-side encryption configurations set a default algorithm.", check_sse_configuration),
    ResourceRule("imdsv2-required", "Launch templates and instances require IMDSv2 (httpTokens required).",
                 check_imdsv2),
    ResourceRule("imds-hop-limit-1",
                 "Launch templates and instances set the IMDS hop limit to 1 (pods use Pod Identity).",
                 check_imds_hop_limit),
    ResourceRule("public-endpoint-tls",
                 "An internet-facing load-balancer Service terminates TLS and has no plain listener.",
                 check_public_endpoint_tls),
    ResourceRule("vllm-api-key-from-secret",
                 f"vLLM and SGLang servers take their API key from a Secret ({API_KEY_ENV}; {SGLANG_API_KEY_ENV} "
                 f"expanded into --api-key).", check_vllm_api_key),
)


def resource_violations(type_: str, name: str, props: Mapping[str, Any]) -> dict[str, list[str]]:
    """Rule name -> messages, for the rules that fail on this resource."""
    found = {r.name: r.check(type_, name, props) for r in RESOURCE_RULES}
    return {k: v for k, v in found.items() if v}
