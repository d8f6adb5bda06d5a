"""Every flow the system needs (infra/data/flows.yaml) is allowed by the rendered NetworkPolicies of
every bundled stack, and nothing else is, decided as the VPC CNI's policy agent enforces them
(infra/fit/flows.py: egress before DNAT, so a Service is matched by its ClusterIP)."""

from __future__ import annotations

import ipaddress
from itertools import product
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.config import settings as infra_settings
from infra.config.names import NAMESPACE, POOL_LABEL
from infra.config.platform import load_platform
from infra.fit import flows
from infra.kubernetes import netpol, router, smoke
from infra.kubernetes.k8s_common import APP_LABEL, COMPONENT_LABEL, ENDPOINT_LABEL, MONITORING_NAMESPACE, PART_OF_LABEL
from infra.kubernetes.netpol import WEIGHTS_JOB_LABELS, api_service_ip
from tests.k8s_support import STACK_IDS, objects
from tests.plan_factory import make_plan, make_pool

SERVICE_CIDR = load_platform().service_ipv4_cidr
POD_CIDR = "10.40.64.0/19"  # pod addresses come from the VPC's private subnets (VPC CNI)
INTERNET = "198.51.100.7"  # an address outside the cluster and the VPC (S3, the hub, a client)
VPC_ADDRESS = "10.40.0.5"  # a VPC address that is no pod: e.g. the control plane's ENI behind the API's ClusterIP
IMDS = "169.254.169.254"
PROBE_PORTS = [(53, "UDP"), (53, "TCP"), (22, "TCP"), (80, "TCP"), (443, "TCP"), (6443, "TCP"), (8000, "TCP"),
               (8080, "TCP"), (9090, "TCP"), (29500, "TCP")]
ANY_SAMPLES = [8000, 22, 29500, 443]


def _extra_pods() -> list[tuple[str, str, dict[str, str], dict[str, int]]]:
    np = infra_settings.policy().network_policy
    return [("prometheus", MONITORING_NAMESPACE, dict(np.prometheus_pod_labels), {"web": 9090}),
            ("keda", infra_settings.chart("keda").namespace, {"app": "keda-operator"}, {}),
            ("coredns", np.dns_namespace, dict(np.dns_pod_labels), {"dns": 53})]


def _pod_roles(pod: flows.Pod) -> set[str]:
    m, np = flows.selector_matches, infra_settings.policy().network_policy
    out = set()
    serving = {APP_LABEL: "vllm", COMPONENT_LABEL: "serving", PART_OF_LABEL: "llmcap"}
    if pod.namespace == NAMESPACE:
        for role, labels in (("router", router.LABELS), ("serving", serving),
                             ("engine", {**serving, ENDPOINT_LABEL: "true"}), ("weights-job", WEIGHTS_JOB_LABELS),
                             ("smoke-job", smoke.LABELS)):
            if m({"matchLabels": labels}, pod.labels):
                out.add(role)
    if pod.namespace == MONITORING_NAMESPACE and m({"matchLabels": np.prometheus_pod_labels}, pod.labels):
        out.add("prometheus")
    if pod.namespace == np.dns_namespace and m({"matchLabels": np.dns_pod_labels}, pod.labels):
        out.add("dns")
    if pod.namespace == infra_settings.chart("keda").namespace:
        out.add("keda")
    return out


def _address_roles(net: flows.Network, ip: str) -> set[str]:
    out: set[str] = set()
    svc = net.service_at(ip)
    if svc is not None:
        out.add({"kubernetes": "api", "kube-dns": "dns", router.NAME: "router-service"}.get(svc.name, svc.name))
    pod = net.pod_at(ip)
    if pod is not None:
        out |= _pod_roles(pod)
    if ipaddress.ip_address(ip) not in ipaddress.ip_network(SERVICE_CIDR):
        out.add("outside")
    np = infra_settings.policy().network_policy
    if any(ipaddress.ip_address(ip) in ipaddress.ip_network(c) for c in np.pod_identity_agent_cidrs
           if ipaddress.ip_network(c).version == 4):
        out.add("pod-identity-agent")
    return out


def _network(objs: list[dict[str, Any]]) -> flows.Network:
    return flows.network_for(objs, SERVICE_CIDR, POD_CIDR, _extra_pods())


def _router_service_port(net: flows.Network) -> int:
    return next(s.ports[0].port for s in net.services if s.name == router.NAME)


def _pool(pod: flows.Pod | None) -> str | None:
    return pod.labels.get(POOL_LABEL) if pod else None


def _needed(net: flows.Network, src: str, dst: str, port: int, proto: str) -> list[str]:
    """The flows that cover a connection (empty: nothing needs it)."""
    numbers = flows.port_numbers(_router_service_port(net))
    sp = net.pod_at(src)
    src_roles = (_pod_roles(sp) if sp else {"outside"}) | {"anyone"}
    dst_roles = _address_roles(net, dst)
    return [f.name for f in flows.needed_flows()
            if set(f.sources) & src_roles and f.to in dst_roles and proto in f.protocols
            and (f.port == "any" or numbers[f.port] == port)
            and (not f.same_pool or _pool(sp) == _pool(net.pod_at(dst)))]


def _members(net: flows.Network, role: str) -> list[str]:
    """The addresses that stand for a role in the checks."""
    specials = {"api": "kubernetes", "dns": "kube-dns", "router-service": router.NAME}
    if role in specials:
        return [s.cluster_ip for s in net.services if s.name == specials[role] and s.cluster_ip]
    if role in ("outside", "anyone"):
        return [INTERNET]
    if role == "pod-identity-agent":
        return [str(ipaddress.ip_network(infra_settings.policy().network_policy.pod_identity_agent_cidrs[0])[0])]
    return [p.ip for p in net.pods if role in _pod_roles(p)]


def missing_flows(net: flows.Network, resolve_services: bool = True) -> list[str]:
    """Needed flows the policies deny, as 'flow: src -> dst:port/proto' lines."""
    numbers = flows.port_numbers(_router_service_port(net))
    out = []
    for f in flows.needed_flows():
        ports = ANY_SAMPLES if f.port == "any" else [numbers[f.port]]
        for role in f.sources:
            srcs, dsts = _members(net, role), _members(net, f.to)
            assert srcs and dsts, f"{f.name}: no {role} or {f.to} in the rendered stack"
            for src, dst, port, proto in product(srcs, dsts, ports, f.protocols):
                if f.same_pool and _pool(net.pod_at(src)) != _pool(net.pod_at(dst)):
                    continue
                if not flows.allowed(net, src, dst, port, proto, resolve_services=resolve_services):
                    out.append(f"{f.name}: {src} -> {dst}:{port}/{proto}")
    return out


def _governed(net: flows.Network, src: str, dst: str) -> bool:
    """Our policies decide it: the source or a destination pod is in the serving namespace."""
    def ours(ip: str) -> bool:
        pod = net.pod_at(ip)
        svc = net.service_at(ip)
        pods = [pod] if pod else (net.backends(svc) if svc else [])
        return any(p.namespace == NAMESPACE for p in pods)
    return ours(src) or ours(dst)


def extra_flows(net: flows.Network) -> list[str]:
    """Allowed connections no needed flow covers."""
    addresses = [p.ip for p in net.pods] + [s.cluster_ip for s in net.services if s.cluster_ip] \
        + [INTERNET, VPC_ADDRESS, IMDS, _members(net, "pod-identity-agent")[0]]
    sources = [p.ip for p in net.pods] + [INTERNET, VPC_ADDRESS]
    out = []
    for src, dst in product(sources, addresses):
        if src == dst or not _governed(net, src, dst):
            continue
        for port, proto in PROBE_PORTS:
            if flows.allowed(net, src, dst, port, proto) and not _needed(net, src, dst, port, proto):
                out.append(f"{src} ({_address_roles(net, src)}) -> {dst} ({_address_roles(net, dst)}):{port}/{proto}")
    return out


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_every_needed_flow_is_allowed(stack_id: str) -> None:
    net = _network(objects(stack_id))
    assert missing_flows(net) == [], stack_id


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_nothing_else_is_allowed(stack_id: str) -> None:
    net = _network(objects(stack_id))
    assert extra_flows(net) == [], stack_id


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_the_router_reaches_the_api_by_its_cluster_ip_without_the_service_workaround(stack_id: str) -> None:
    """The API flow must not lean on the controller's ClusterIP workaround (its issue #222): an ipBlock
    holds the ClusterIP of default/kubernetes."""
    net = _network(objects(stack_id))
    api = api_service_ip(SERVICE_CIDR)
    rtr = _members(net, "router")[0]
    assert flows.allowed(net, rtr, api, 443, resolve_services=False), stack_id
    # the control plane's VPC address is never what the agent sees (pre-DNAT), so it need not be open
    assert not flows.allowed(net, rtr, VPC_ADDRESS, 443), stack_id


def test_a_vpc_cidr_rule_does_not_reach_the_api() -> None:
    """The policy before issue 32 (the router's API egress by the VPC CIDR) fails the flow check."""
    objs = [dict(o) for o in objects("dev")]
    for o in objs:
        if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "router":
            spec = dict(o["spec"])
            spec["egress"] = [spec["egress"][0], {"to": [{"ipBlock": {"cidr": "10.40.0.0/16"}}],
                                                  "ports": [{"protocol": "TCP", "port": 443}]}]
            o["spec"] = spec
    missing = missing_flows(_network(objs))
    assert any(m.startswith("router-to-api:") for m in missing), missing


def test_the_evaluator_follows_the_controller_for_service_destinations() -> None:
    """A podSelector peer reaches a Service's ClusterIP only when it matches the Service's selector, on the
    Service port whose targetPort is the rule's port (endpoints.go getMatchingServiceClusterIPs)."""
    net = _network(objects("dev"))
    smoke_pod = _members(net, "smoke-job")[0]
    svc_ip = _members(net, "router-service")[0]
    port = _router_service_port(net)
    assert flows.allowed(net, smoke_pod, svc_ip, port)
    assert not flows.allowed(net, smoke_pod, svc_ip, port, resolve_services=False)
    assert not flows.allowed(net, smoke_pod, svc_ip, port + 1)
    # the weights Job's HTTPS to anywhere leaves the Service range out: no route to the API
    job = _members(net, "weights-job")[0]
    assert flows.allowed(net, job, INTERNET, 443)
    assert not flows.allowed(net, job, api_service_ip(SERVICE_CIDR), 443)


_NAMES = st.lists(st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True), min_size=1, max_size=4, unique=True)


@settings(max_examples=15, deadline=None)
@given(names=_NAMES, multi=st.lists(st.booleans(), min_size=4, max_size=4))
def test_generated_pools_get_exactly_the_needed_flows(names: list[str], multi: list[bool]) -> None:
    """Pools the bundled stacks do not have: the policies of netpol.network_policies for them, with a pod
    per pool (a leader and a worker for a multi-node pool) beside the dev stack's router and Jobs."""
    plan = make_plan([make_pool(name=n) for n in names])
    base = [o for o in objects("dev") if o["kind"] in ("Deployment", "Job", "Service")
            and not o["metadata"]["name"].startswith("vllm-")]
    pods = []
    for n, lws in zip(names, multi, strict=False):
        labels = {APP_LABEL: "vllm", COMPONENT_LABEL: "serving", PART_OF_LABEL: "llmcap", POOL_LABEL: n}
        template = {"metadata": {"labels": {**labels, ENDPOINT_LABEL: "true"}},
                    "spec": {"containers": [{"ports": [{"name": "http", "containerPort": 8000}]}]}}
        pods.append({"kind": "Job", "metadata": {"name": f"vllm-{n}", "namespace": NAMESPACE},
                     "spec": {"template": template}})
        if lws:
            pods.append({"kind": "Job", "metadata": {"name": f"vllm-{n}-w", "namespace": NAMESPACE},
                         "spec": {"template": {"metadata": {"labels": labels}, "spec": {"containers": [{}]}}}})
    net = _network([*base, *pods, *netpol.network_policies(plan, NAMESPACE, SERVICE_CIDR)])
    assert missing_flows(net) == []
    assert extra_flows(net) == []


# flows that reach a Service through a podSelector peer, so they lean on the policy controller's ClusterIP
# workaround (endpoints.go getMatchingServiceClusterIPs; its issue #222 reports it missing at times): DNS
# (CoreDNS's ClusterIP is not pinned here) and the in-cluster calls to the router's Service
SERVICE_WORKAROUND_FLOWS = {"dns", "smoke-to-router", "in-cluster-clients-to-router"}


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_only_known_flows_depend_on_the_controllers_cluster_ip_workaround(stack_id: str) -> None:
    net = _network(objects(stack_id))
    leaning = {m.split(":")[0] for m in missing_flows(net, resolve_services=False)}
    assert leaning <= SERVICE_WORKAROUND_FLOWS, stack_id
    assert "router-to-api" not in leaning
