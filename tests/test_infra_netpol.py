"""NetworkPolicies (issue 18 item 13): default deny, then router -> vLLM, Prometheus -> metrics, DNS,
weights egress. Checked by evaluating the rendered policies the way the API defines them (a pod is
isolated for a direction once any policy selects it; then only a matching rule admits a connection)."""

from __future__ import annotations

import ipaddress
from typing import Any

import kubernetes_validate
import pytest

from infra.config.names import NAMESPACE
from infra.config.platform import load_platform
from infra.kubernetes import router
from infra.kubernetes.k8s_common import ENDPOINT_LABEL, MONITORING_NAMESPACE, serving_labels
from infra.kubernetes.netpol import WEIGHTS_JOB_LABELS, api_service_ip
from tests.k8s_support import STACK_IDS, objects, rendered
from tests.plan_factory import make_plan
from tests.pulumi_harness import render
from tests.test_fit_platform import stack as make_stack

NS_LABEL = "kubernetes.io/metadata.name"


class Pod:
    def __init__(self, ns: str, labels: dict[str, str], ip: str) -> None:
        self.ns, self.labels, self.ip = ns, labels, ip


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _peer_matches(peer: dict[str, Any], pod: Pod | None, ip: str, policy_ns: str) -> bool:
    if "ipBlock" in peer:
        net = ipaddress.ip_network(peer["ipBlock"]["cidr"])
        addr = ipaddress.ip_address(ip)
        return addr.version == net.version and addr in net and not any(
            addr in ipaddress.ip_network(x) for x in peer["ipBlock"].get("except", []))
    if pod is None:
        return False
    if "namespaceSelector" in peer:
        if not _matches(peer["namespaceSelector"], {NS_LABEL: pod.ns}):
            return False
    elif pod.ns != policy_ns:
        return False
    return _matches(peer.get("podSelector") or {}, pod.labels)


def _port_ok(rule: dict[str, Any], port: int, proto: str) -> bool:
    ports = rule.get("ports")
    return not ports or any(p.get("protocol", "TCP") == proto and p.get("port", port) == port for p in ports)


def allowed(policies: list[dict[str, Any]], src: Pod, dst: Pod | None, port: int, proto: str = "TCP",
            dst_ip: str | None = None) -> bool:
    """Egress from src and ingress to dst (when dst is a pod) both admit the connection."""
    ip = dst.ip if dst else dst_ip
    assert ip

    def direction(pod: Pod, kind: str, peer_key: str, other: Pod | None, other_ip: str) -> bool:
        selecting = [p for p in policies if p["metadata"]["namespace"] == pod.ns
                     and kind in p["spec"]["policyTypes"] and _matches(p["spec"]["podSelector"], pod.labels)]
        if not selecting:
            return True
        for p in selecting:
            for rule in p["spec"].get(kind.lower(), []):
                peers = rule.get(peer_key)
                if (not peers or any(_peer_matches(x, other, other_ip, p["metadata"]["namespace"]) for x in peers)) \
                        and _port_ok(rule, port, proto):
                    return True
        return False

    if not direction(src, "Egress", "to", dst, ip):
        return False
    return dst is None or direction(dst, "Ingress", "from", src, src.ip)


@pytest.fixture(scope="module")
def dev() -> list[dict[str, Any]]:
    return [o for o in objects("dev") if o["kind"] == "NetworkPolicy"]


def _pods(stack_id: str) -> dict[str, Pod]:
    pool = rendered(stack_id)[0].plan.pools[0].name
    return {
        "router": Pod(NAMESPACE, dict(router.LABELS), "10.40.1.10"),
        "vllm": Pod(NAMESPACE, {**serving_labels(pool), ENDPOINT_LABEL: "true"}, "10.40.2.10"),
        "worker": Pod(NAMESPACE, serving_labels(pool), "10.40.2.11"),
        "job": Pod(NAMESPACE, dict(WEIGHTS_JOB_LABELS), "10.40.3.10"),
        "stranger": Pod(NAMESPACE, {"app": "debug"}, "10.40.3.11"),
        "other-ns": Pod("default", {"app": "x"}, "10.40.3.12"),
        "prometheus": Pod(MONITORING_NAMESPACE, {"app.kubernetes.io/name": "prometheus"}, "10.40.4.10"),
        "dns": Pod("kube-system", {"k8s-app": "kube-dns"}, "10.40.5.10"),
    }


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_network_policies_validate_and_default_deny(stack_id: str) -> None:
    pols = [o for o in objects(stack_id) if o["kind"] == "NetworkPolicy"]
    for p in pols:
        kubernetes_validate.validate(p, load_platform().kubernetes_version, strict=True)
    deny = [p for p in pols if p["spec"]["podSelector"] == {}
            and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"} and not p["spec"].get("ingress")
            and not p["spec"].get("egress")]
    assert deny, f"{stack_id}: no default-deny policy"


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_only_the_router_and_prometheus_reach_vllm(stack_id: str) -> None:
    pols = [o for o in objects(stack_id) if o["kind"] == "NetworkPolicy"]
    pods = _pods(stack_id)
    v = pods["vllm"]
    assert allowed(pols, pods["router"], v, 8000), stack_id
    assert allowed(pols, pods["prometheus"], v, 8000), stack_id
    for name in ("stranger", "job", "other-ns"):
        assert not allowed(pols, pods[name], v, 8000), f"{stack_id}: {name} reaches vLLM"
    assert not allowed(pols, pods["prometheus"], v, 22), stack_id
    # a LeaderWorkerSet group talks on any port within its pool
    assert allowed(pols, pods["worker"], v, 29500) and allowed(pols, v, pods["worker"], 29500), stack_id
    assert not allowed(pols, pods["stranger"], pods["router"], 22), stack_id


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_egress_only_dns_weights_and_credentials(stack_id: str) -> None:
    pols = [o for o in objects(stack_id) if o["kind"] == "NetworkPolicy"]
    pods = _pods(stack_id)
    for name in ("router", "vllm", "job", "stranger"):
        assert allowed(pols, pods[name], pods["dns"], 53, "UDP"), f"{stack_id}: {name} has no DNS"
    s3 = "52.216.0.10"  # an S3 address (through the gateway endpoint, still S3's public range)
    for name in ("vllm", "job"):
        assert allowed(pols, pods[name], None, 443, dst_ip=s3), f"{stack_id}: {name} cannot reach S3"
        assert allowed(pols, pods[name], None, 80, dst_ip="169.254.170.23"), f"{stack_id}: {name}: no credentials"
    assert not allowed(pols, pods["vllm"], None, 80, dst_ip="169.254.169.254"), "IMDS must stay closed"
    assert not allowed(pols, pods["stranger"], None, 443, dst_ip=s3)
    assert not allowed(pols, pods["router"], None, 443, dst_ip=s3)  # the router only needs the API
    # the API server by the ClusterIP of default/kubernetes (pre-DNAT, infra/fit/flows.py), not its ENIs' VPC addresses
    api = api_service_ip(load_platform().service_ipv4_cidr)
    assert allowed(pols, pods["router"], None, 443, dst_ip=api)
    assert not allowed(pols, pods["router"], None, 443, dst_ip="10.40.0.5")
    for name in ("vllm", "job"):
        assert not allowed(pols, pods[name], None, 443, dst_ip=api), f"{stack_id}: {name} reaches the API"
    assert allowed(pols, pods["router"], pods["vllm"], 8000)


def test_a_vpc_you_bring_reaches_the_api_by_its_cluster_ip_too() -> None:
    from infra.kubernetes.manifests import kubernetes_objects
    from infra.render import resources_document

    stack = make_stack({"vpc_id": "vpc-1", "private_subnet_ids": ["subnet-a", "subnet-b"]})
    objs = kubernetes_objects(resources_document(render(stack, make_plan(stack="t"))))
    pol = next(o for o in objs if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "router")
    api = api_service_ip(load_platform().service_ipv4_cidr)
    assert pol["spec"]["egress"][1]["to"] == [{"ipBlock": {"cidr": f"{api}/32"}}]


def test_the_vpc_cni_enforces_network_policies() -> None:
    import json

    from tests import pulumi_harness as h

    result = h.bundled("dev")
    cni = next(a for a in result.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "vpc-cni")
    assert json.loads(cni.inputs["configurationValues"])["enableNetworkPolicy"] == "true"
