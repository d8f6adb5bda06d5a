"""NetworkPolicies of the serving namespace: default deny in and out, then only what the stack needs
(issue 18 item 13). No pulumi import.

- every pod: DNS to CoreDNS;
- router: in from anywhere on its port (the NLB in front is internal, or public with source ranges);
  out to the serving endpoints' port and the Kubernetes API (service discovery);
- vLLM pods: in from the router and from Prometheus (metrics) on the vLLM port; all ports between pods
  of the same pool (LeaderWorkerSet groups talk NCCL/torch.distributed); out to S3 over HTTPS (weights)
  and the Pod Identity agent (credentials), and to pods of the same pool;
- weights job: out over HTTPS (Hugging Face hub, S3) and to the Pod Identity agent; nothing in.

The Kubernetes API is addressed by the VPC CIDR when llmcap creates the VPC (the private endpoint's
ENIs live in its subnets); with a VPC you bring, HTTPS to anywhere. Constants: infra/data/serving.yaml."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infra import router, settings
from infra.k8s_common import (
    APP_LABEL,
    COMPONENT_LABEL,
    ENDPOINT_LABEL,
    MONITORING_NAMESPACE,
    PART_OF_LABEL,
    dns_name,
    meta,
    serving_labels,
)
from infra.names import POOL_LABEL

if TYPE_CHECKING:
    from sizing.plan import Plan

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
WEIGHTS_JOB_LABELS = {APP_LABEL: "weights-copy"}
ANYWHERE = ("0.0.0.0/0", "::/0")
LABELS = {PART_OF_LABEL: "llmcap"}


def _policy(name: str, namespace: str, pod_selector: dict[str, Any], ingress: list[dict[str, Any]] | None,
            egress: list[dict[str, Any]] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": pod_selector, "policyTypes": []}
    if ingress is not None:
        spec["policyTypes"].append("Ingress")
        spec["ingress"] = ingress
    if egress is not None:
        spec["policyTypes"].append("Egress")
        spec["egress"] = egress
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": meta(name, namespace, LABELS), "spec": spec}


def _tcp(port: int | str) -> dict[str, Any]:
    return {"protocol": "TCP", "port": port}


def _blocks(cidrs: tuple[str, ...] | list[str]) -> list[dict[str, Any]]:
    return [{"ipBlock": {"cidr": c}} for c in cidrs]


def network_policies(plan: Plan, namespace: str, vpc_cidr: str | None) -> list[dict[str, Any]]:
    """The namespace's policies; `vpc_cidr` None when the VPC is the user's (its CIDR unknown here)."""
    p = settings.policy()
    np = p.network_policy
    vllm_port, router_port, https = p.vllm_port, p.router.port, np.https_port
    dns = {"to": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: np.dns_namespace}},
                   "podSelector": {"matchLabels": dict(np.dns_pod_labels)}}],
           "ports": [{"protocol": "UDP", "port": np.dns_port}, _tcp(np.dns_port)]}
    credentials = {"to": _blocks(list(np.pod_identity_agent_cidrs)),
                   "ports": [_tcp(np.pod_identity_agent_port)]}
    out_https = {"to": _blocks(ANYWHERE), "ports": [_tcp(https)]}
    api = {"to": _blocks([vpc_cidr] if vpc_cidr else list(ANYWHERE)), "ports": [_tcp(https)]}
    serving = {APP_LABEL: "vllm", COMPONENT_LABEL: "serving", PART_OF_LABEL: "llmcap"}
    endpoints = {**serving, ENDPOINT_LABEL: "true"}
    prometheus = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: MONITORING_NAMESPACE}},
                  "podSelector": {"matchLabels": dict(np.prometheus_pod_labels)}}
    policies = [
        _policy("default-deny", namespace, {}, [], []),
        _policy("allow-dns", namespace, {}, None, [dns]),
        _policy("router", namespace, {"matchLabels": dict(router.LABELS)},
                [{"from": _blocks(ANYWHERE), "ports": [_tcp(router_port)]}],
                [{"to": [{"podSelector": {"matchLabels": endpoints}}], "ports": [_tcp(vllm_port)]}, api]),
        _policy("weights-job", namespace, {"matchLabels": dict(WEIGHTS_JOB_LABELS)}, [], [out_https, credentials]),
    ]
    for pool in plan.pools:
        same_pool = {"podSelector": {"matchLabels": serving_labels(pool.name)}}
        policies.append(_policy(
            dns_name(f"vllm-{pool.name}"), namespace,
            {"matchLabels": {**serving, POOL_LABEL: pool.name}},
            [{"from": [{"podSelector": {"matchLabels": dict(router.LABELS)}}, prometheus],
              "ports": [_tcp(vllm_port)]},
             {"from": [same_pool]}],
            [out_https, credentials, {"to": [same_pool]}]))
    return policies
