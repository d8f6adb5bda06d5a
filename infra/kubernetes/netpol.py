"""NetworkPolicies of the serving namespace: default deny in and out, then only what the stack needs
(issue 18 item 13). No pulumi import.

- every pod: DNS to CoreDNS;
- router: in from anywhere on its port (the NLB in front is internal, or public with source ranges);
  out to the serving endpoints' port and the Kubernetes API (service discovery);
- vLLM pods: in from the router and from Prometheus (metrics) on the vLLM port; all ports between pods
  of the same pool over TCP (LeaderWorkerSet groups talk NCCL/torch.distributed); out to S3 over HTTPS (weights)
  and the Pod Identity agent (credentials), and to pods of the same pool;
- weights job: out over HTTPS (Hugging Face hub, S3) and to the Pod Identity agent; nothing in;
- smoke job: out to the router (its Service); nothing in.

The VPC CNI's policy agent matches a pod's egress on its veth, before kube-proxy's DNAT
(aws/amazon-network-policy-controller-k8s pkg/resolvers/endpoints.go, getMatchingServiceClusterIPs:
"unable to see the pod IP after the DNAT happens for the clusterIPs"), so the router reaches the API
server by the ClusterIP of `default/kubernetes` (the first address of the cluster's pinned Service
range, infra/data/platform.yaml), not by the control-plane ENIs' VPC addresses; HTTPS to anywhere
leaves the Service range out, so nothing else reaches the API. The flows the system needs, and the
evaluator that checks these policies against them: infra/data/flows.yaml, infra/fit/flows.py.
Constants: infra/data/serving.yaml."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from infra.config import settings
from infra.config.names import POOL_LABEL
from infra.kubernetes import router, smoke
from infra.kubernetes.k8s_common import (
    APP_LABEL,
    COMPONENT_LABEL,
    ENDPOINT_LABEL,
    MONITORING_NAMESPACE,
    PART_OF_LABEL,
    dns_name,
    meta,
    serving_labels,
)

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


def _outside(service_cidr: str) -> list[dict[str, Any]]:
    """Anywhere but the cluster's Service range (IPv4 and IPv6)."""
    return [{"ipBlock": {"cidr": ANYWHERE[0], "except": [service_cidr]}}, {"ipBlock": {"cidr": ANYWHERE[1]}}]


def api_service_ip(service_cidr: str) -> str:
    """The ClusterIP of `default/kubernetes` (what pods reach as KUBERNETES_SERVICE_HOST): the first address
    of the Service range (kubernetes pkg/controlplane ServiceIPRange: `GetIndexedIP(&serviceClusterIPRange, 1)`)."""
    return str(ipaddress.ip_network(service_cidr)[1])


def network_policies(plan: Plan, namespace: str, service_cidr: str) -> list[dict[str, Any]]:
    """The namespace's policies; `service_cidr`: the cluster's Service range (infra/data/platform.yaml)."""
    p = settings.policy()
    np = p.network_policy
    vllm_port, router_port, https = p.vllm_port, p.router.port, np.https_port
    dns = {"to": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: np.dns_namespace}},
                   "podSelector": {"matchLabels": dict(np.dns_pod_labels)}}],
           "ports": [{"protocol": "UDP", "port": np.dns_port}, _tcp(np.dns_port)]}
    credentials = {"to": _blocks(list(np.pod_identity_agent_cidrs)),
                   "ports": [_tcp(np.pod_identity_agent_port)]}
    out_https = {"to": _outside(service_cidr), "ports": [_tcp(https)]}
    api = {"to": _blocks([f"{api_service_ip(service_cidr)}/32"]), "ports": [_tcp(https)]}
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
        # the router's pods by selector: the policy controller adds the router Service's ClusterIP on the
        # Service port that targets this port (pre-DNAT egress, infra/fit/flows.py)
        _policy("smoke-job", namespace, {"matchLabels": dict(smoke.LABELS)}, [],
                [{"to": [{"podSelector": {"matchLabels": dict(router.LABELS)}}], "ports": [_tcp(router_port)]}]),
    ]
    # every TCP port (a port-less NetworkPolicyPort): NCCL's sockets and torch.distributed's store are TCP
    any_tcp = {"protocol": "TCP"}
    for pool in plan.pools:
        same_pool = {"podSelector": {"matchLabels": serving_labels(pool.name)}}
        policies.append(_policy(
            dns_name(f"vllm-{pool.name}"), namespace,
            {"matchLabels": {**serving, POOL_LABEL: pool.name}},
            [{"from": [{"podSelector": {"matchLabels": dict(router.LABELS)}}, prometheus],
              "ports": [_tcp(vllm_port)]},
             {"from": [same_pool], "ports": [any_tcp]}],
            [out_https, credentials, {"to": [same_pool], "ports": [any_tcp]}]))
    return policies
