"""Which connections the rendered NetworkPolicies allow, decided the way EKS enforces them, and the
flows the system needs (infra/data/flows.yaml). Pure: no pulumi import; tests/test_flows.py checks
every bundled stack both ways (each needed flow allowed, every other probe denied).

Enforcement modelled (the VPC CNI's network policy agent, with the policies resolved by
aws/amazon-network-policy-controller-k8s pkg/resolvers/endpoints.go, read at commit 03e22b50):
- a pod is isolated for a direction once a policy of its namespace selects it for that direction; then
  a connection passes only when some rule of those policies admits it (Kubernetes NetworkPolicy API);
- egress is matched on the pod's veth, *before* kube-proxy's DNAT: a connection to a Service is seen
  with the Service's ClusterIP and port ("unable to see the pod IP after the DNAT happens for the
  clusterIPs", getMatchingServiceClusterIPs). An ipBlock admits it only when the block holds the
  ClusterIP; the VPC addresses of the endpoints behind it never match;
- an egress podSelector/namespaceSelector peer resolves to the selected pods' IPs and, as the
  controller's workaround, to the ClusterIPs of the non-headless Services in the selected namespaces
  whose `spec.selector` the peer's podSelector matches (a Service without a selector is matched by an
  empty podSelector only: `svcSelector.Matches(labels.Set(svc.Spec.Selector))`), on the Service ports
  whose targetPort is the rule's port (LookupServiceListenPort, then the pods' named ports). The
  controller has been seen to leave those ClusterIPs out (its issue #222), so `resolve_services=False`
  checks a flow that must not depend on it;
- ipBlock ports are numbers only: a named port in an ipBlock rule is dropped, and a rule whose ports
  are all named admits nothing (convertToPolicyInfoPortForCIDRs);
- ingress is matched on the destination pod after DNAT: the source pod's IP and the pod's own port."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field

from infra.config import settings
from infra.kubernetes.k8s_common import PROMETHEUS_URL

DATA_FILE = Path(__file__).parent.parent / "data" / "flows.yaml"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
ANY_PORT = -1  # the flows file's `any`: the tests probe it at sample ports


class Flow(BaseModel):
    """One connection the system needs: from each role in `sources` to role `to` on `port`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str
    sources: list[str] = Field(alias="from")
    to: str
    port: str
    protocols: list[Literal["TCP", "UDP"]]
    same_pool: bool = False  # both ends in the same plan pool
    why: str

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Flow:
        src = raw.get("from")
        return cls.model_validate({**raw, "from": src if isinstance(src, list) else [src]})


class _FlowsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    flows: list[dict[str, Any]]


@cache
def needed_flows() -> tuple[Flow, ...]:
    doc = _FlowsFile.model_validate(yaml.safe_load(DATA_FILE.read_text(encoding="utf-8")))
    return tuple(Flow.parse(f) for f in doc.flows)


def port_numbers(router_service_port: int) -> dict[str, int]:
    """The flows file's port names as numbers (from the serving settings; `any` is every port)."""
    p = settings.policy()
    np = p.network_policy
    return {"vllm": p.vllm_port, "router": p.router.port, "router-service": router_service_port,
            "https": np.https_port, "dns": np.dns_port, "pod-identity": np.pod_identity_agent_port,
            "prometheus": urlsplit(PROMETHEUS_URL).port or 0, "any": ANY_PORT}


# ---------------------------------------------------------------- the network: pods, Services, policies

@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: dict[str, str]
    ip: str
    named_ports: dict[str, int] = field(default_factory=dict)  # containerPort by name (TCP)


@dataclass(frozen=True)
class ServicePort:
    port: int
    target: int | str  # a number, or the name of a container port
    protocol: str = "TCP"


@dataclass(frozen=True)
class Service:
    name: str
    namespace: str
    cluster_ip: str | None  # None: headless
    selector: dict[str, str] | None  # None: no selector (endpoints managed elsewhere, e.g. default/kubernetes)
    ports: tuple[ServicePort, ...]


@dataclass
class Network:
    policies: list[dict[str, Any]]
    pods: list[Pod]
    services: list[Service]

    def pod_at(self, ip: str) -> Pod | None:
        return next((p for p in self.pods if p.ip == ip), None)

    def service_at(self, ip: str) -> Service | None:
        return next((s for s in self.services if s.cluster_ip == ip), None)

    def backends(self, svc: Service) -> list[Pod]:
        if svc.selector is None:
            return []
        return [p for p in self.pods if p.namespace == svc.namespace and _labels_match(svc.selector, p.labels)]


# ---------------------------------------------------------------- selectors and ports

def _labels_match(match_labels: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in match_labels.items())


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels and matchExpressions); None or {} selects everything."""
    if not selector:
        return True
    if not _labels_match(selector.get("matchLabels") or {}, labels):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        ok = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True


def _in_block(block: dict[str, Any], ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    net = ipaddress.ip_network(block["cidr"])
    if addr.version != net.version or addr not in net:
        return False
    return not any(addr in ipaddress.ip_network(x) for x in block.get("except") or []
                   if ipaddress.ip_network(x).version == addr.version)


def _port_in(rule_port: dict[str, Any], number: int, protocol: str) -> bool:
    if rule_port.get("protocol", "TCP") != protocol:
        return False
    if rule_port.get("port") is None:
        return True
    start = int(rule_port["port"])
    return start <= number <= int(rule_port.get("endPort") or start)


def _numeric(ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in ports if not isinstance(p.get("port"), str)]


def _on_pod(ports: list[dict[str, Any]] | None, pod: Pod) -> list[dict[str, Any]] | None:
    """A rule's ports with named ones resolved on `pod` (a name the pod lacks drops that port)."""
    if ports is None:
        return None
    out = []
    for p in ports:
        if isinstance(p.get("port"), str):
            if p["port"] in pod.named_ports:
                out.append({**p, "port": pod.named_ports[p["port"]]})
        else:
            out.append(p)
    return out


def _ports_admit(ports: list[dict[str, Any]] | None, number: int, protocol: str) -> bool:
    """`ports` None (or absent) admits every port; an empty list after resolution admits none."""
    return ports is None or any(_port_in(p, number, protocol) for p in ports)


def _namespace_matches(peer: dict[str, Any], namespace: str, policy_namespace: str) -> bool:
    if "namespaceSelector" in peer:
        return selector_matches(peer["namespaceSelector"], {NAMESPACE_NAME_LABEL: namespace})
    return namespace == policy_namespace


# ---------------------------------------------------------------- egress, pre-DNAT

def _service_ports_for(net: Network, svc: Service, rule_ports: list[dict[str, Any]] | None) -> list[ServicePort]:
    """The Service's ports a pod-peer rule reaches through the controller's ClusterIP workaround."""
    if rule_ports is None:
        return list(svc.ports)
    out = []
    for rp in rule_ports:
        for sp in svc.ports:
            if sp.protocol != rp.get("protocol", "TCP"):
                continue
            want = rp.get("port")
            if want is None or sp.target == want or isinstance(sp.target, str) and isinstance(want, int) and any(
                    b.named_ports.get(sp.target) == want for b in net.backends(svc)):
                out.append(sp)
    return out


def _egress_peer_admits(net: Network, peer: dict[str, Any], rule_ports: list[dict[str, Any]] | None,
                        policy_ns: str, dst_ip: str, port: int, protocol: str, resolve_services: bool) -> bool:
    if "ipBlock" in peer:
        ports = None if rule_ports is None else _numeric(rule_ports)
        if rule_ports and not ports:
            return False
        return _in_block(peer["ipBlock"], dst_ip) and _ports_admit(ports, port, protocol)
    pod = net.pod_at(dst_ip)
    if pod is not None:
        return (_namespace_matches(peer, pod.namespace, policy_ns)
                and selector_matches(peer.get("podSelector"), pod.labels)
                and _ports_admit(_on_pod(rule_ports, pod), port, protocol))
    svc = net.service_at(dst_ip)
    if svc is None or not resolve_services or not _namespace_matches(peer, svc.namespace, policy_ns):
        return False
    if not selector_matches(peer.get("podSelector"), svc.selector or {}):
        return False
    return any(sp.port == port and sp.protocol == protocol for sp in _service_ports_for(net, svc, rule_ports))


def _selecting(policies: Iterable[dict[str, Any]], pod: Pod, kind: str) -> list[dict[str, Any]]:
    return [p for p in policies if p["metadata"].get("namespace") == pod.namespace
            and kind in p["spec"].get("policyTypes", []) and selector_matches(p["spec"]["podSelector"], pod.labels)]


def egress_allowed(net: Network, src: Pod, dst_ip: str, port: int, protocol: str = "TCP", *,
                   resolve_services: bool = True) -> bool:
    selecting = _selecting(net.policies, src, "Egress")
    if not selecting:
        return True
    for pol in selecting:
        for rule in pol["spec"].get("egress") or []:
            peers, ports = rule.get("to"), rule.get("ports")
            if not peers:
                if _ports_admit(None if ports is None else _numeric(ports), port, protocol):
                    return True
                continue
            if any(_egress_peer_admits(net, peer, ports, pol["metadata"]["namespace"], dst_ip, port, protocol,
                                       resolve_services) for peer in peers):
                return True
    return False


# ---------------------------------------------------------------- ingress, post-DNAT

def ingress_allowed(net: Network, dst: Pod, src_ip: str, port: int, protocol: str = "TCP") -> bool:
    selecting = _selecting(net.policies, dst, "Ingress")
    if not selecting:
        return True
    src = net.pod_at(src_ip)
    for pol in selecting:
        for rule in pol["spec"].get("ingress") or []:
            if not _ports_admit(_on_pod(rule.get("ports"), dst), port, protocol):
                continue
            peers = rule.get("from")
            if not peers:
                return True
            for peer in peers:
                if "ipBlock" in peer:
                    if _in_block(peer["ipBlock"], src_ip):
                        return True
                elif src is not None and _namespace_matches(peer, src.namespace, pol["metadata"]["namespace"]) \
                        and selector_matches(peer.get("podSelector"), src.labels):
                    return True
    return False


def allowed(net: Network, src_ip: str, dst_ip: str, port: int, protocol: str = "TCP", *,
            resolve_services: bool = True) -> bool:
    """A connection from `src_ip` (a pod's, or an address outside the cluster) to `dst_ip:port` (a pod,
    a Service's ClusterIP and port, or an outside address) passes the source's egress policies and, once
    DNAT picked an endpoint, the destination pods' ingress policies (every endpoint's: any may be picked)."""
    src = net.pod_at(src_ip)
    if src is not None and not egress_allowed(net, src, dst_ip, port, protocol, resolve_services=resolve_services):
        return False
    svc = net.service_at(dst_ip)
    if svc is not None:
        if not any(sp.port == port and sp.protocol == protocol for sp in svc.ports):
            return False  # kube-proxy has no rule for it: nothing answers
        targets = _service_targets(net, svc, port, protocol)
        return all(ingress_allowed(net, pod, src_ip, number, protocol) for pod, number in targets)
    dst = net.pod_at(dst_ip)
    return dst is None or ingress_allowed(net, dst, src_ip, port, protocol)


def _service_targets(net: Network, svc: Service, port: int, protocol: str) -> Iterator[tuple[Pod, int]]:
    for sp in svc.ports:
        if sp.protocol != protocol or sp.port != port:
            continue
        for pod in net.backends(svc):
            number = pod.named_ports.get(sp.target) if isinstance(sp.target, str) else sp.target
            if number is not None:
                yield pod, number


# ---------------------------------------------------------------- the rendered stack as a network

def _template_pods(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    spec = obj.get("spec") or {}
    if obj["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
        yield obj["metadata"]["name"], spec["template"]
    elif obj["kind"] == "LeaderWorkerSet":
        t = spec["leaderWorkerTemplate"]
        yield obj["metadata"]["name"] + "-leader", t.get("leaderTemplate") or t["workerTemplate"]
        yield obj["metadata"]["name"] + "-worker", t["workerTemplate"]


def _named_ports(template: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: int(p["containerPort"]) for c in template["spec"].get("containers", [])
            for p in c.get("ports") or [] if p.get("name") and p.get("protocol", "TCP") == "TCP"}


def network_for(objects: list[dict[str, Any]], service_cidr: str, pod_cidr: str,
                extra_pods: list[tuple[str, str, dict[str, str], dict[str, int]]]) -> Network:
    """The rendered objects as a network: one pod per workload template (two for a LeaderWorkerSet:
    leader and worker) with an address from `pod_cidr`; their Services with ClusterIPs from `service_cidr`
    (`default/kubernetes` at its first address, selector-less); `extra_pods` are the charts' pods of other
    namespaces, as (name, namespace, labels, named ports)."""
    hosts = ipaddress.ip_network(pod_cidr).hosts()
    pods = [Pod(name, obj["metadata"].get("namespace", ""), dict(t["metadata"].get("labels") or {}),
                str(next(hosts)), _named_ports(t))
            for obj in objects for name, t in _template_pods(obj)]
    pods += [Pod(name, ns, labels, str(next(hosts)), ports) for name, ns, labels, ports in extra_pods]
    svc_ips = ipaddress.ip_network(service_cidr).hosts()
    api_ip = str(next(svc_ips))
    services = [Service("kubernetes", "default", api_ip, None, (ServicePort(443, 443),))]
    np = settings.policy().network_policy
    services.append(Service("kube-dns", np.dns_namespace, str(next(svc_ips)), dict(np.dns_pod_labels),
                            (ServicePort(np.dns_port, np.dns_port, "UDP"), ServicePort(np.dns_port, np.dns_port))))
    for obj in objects:
        if obj["kind"] != "Service":
            continue
        spec = obj["spec"]
        headless = spec.get("clusterIP") == "None"
        services.append(Service(
            obj["metadata"]["name"], obj["metadata"].get("namespace", ""), None if headless else str(next(svc_ips)),
            dict(spec["selector"]) if spec.get("selector") is not None else None,
            tuple(ServicePort(int(p["port"]), p.get("targetPort", p["port"]), p.get("protocol", "TCP"))
                  for p in spec.get("ports") or [])))
    return Network([o for o in objects if o["kind"] == "NetworkPolicy"], pods, services)
