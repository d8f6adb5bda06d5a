"""The router in front of the vLLM replicas: vLLM production-stack's router with prefix-aware
routing (requests sharing a prompt prefix go to the replica holding its KV cache), discovering
the serving pods through the Kubernetes API; exposed by an AWS NLB (AWS Load Balancer Controller
annotations): internal by default, internet-facing only when the stack asks, and then TLS-only
with source ranges. No pulumi import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infra.config import settings
from infra.config.names import ROLE_LABEL
from infra.kubernetes.k8s_common import (
    API_KEY_SECRET,
    API_KEY_SECRET_KEY,
    APP_LABEL,
    COMPONENT_LABEL,
    ENDPOINT_LABEL,
    PART_OF_LABEL,
    container_security_context,
    meta,
    pod_security_context,
    secret_env,
)

if TYPE_CHECKING:
    from sizing.deployment import DeploymentOptions

NAME = "llmcap-router"
LABELS = {APP_LABEL: "vllm-router", COMPONENT_LABEL: "router", PART_OF_LABEL: "llmcap"}
LB = "service.beta.kubernetes.io/aws-load-balancer-"


def service_account(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME, namespace, LABELS)}


def role(namespace: str) -> dict[str, Any]:
    """Read-only access to pods in the serving namespace: what k8s service discovery needs."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(NAME, namespace, LABELS),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}


def role_binding(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": meta(NAME, namespace, LABELS),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]}


def router_args(namespace: str) -> list[str]:
    r = settings.policy().router
    selector = f"{PART_OF_LABEL}=llmcap,{COMPONENT_LABEL}=serving,{ENDPOINT_LABEL}=true"
    return ["--host", "0.0.0.0", "--port", str(r.port),
            "--service-discovery", "k8s", "--k8s-namespace", namespace, "--k8s-label-selector", selector,
            "--k8s-port", str(settings.policy().vllm_port),
            "--routing-logic", r.routing_logic,
            "--engine-stats-interval", str(r.engine_stats_interval_s),
            "--request-stats-window", str(r.request_stats_window_s)]


def _probe(get: dict[str, Any], p: settings.ProbePolicy) -> dict[str, Any]:
    return {"httpGet": get, "periodSeconds": p.period_s, "failureThreshold": p.failure_threshold}


def readiness_probe() -> dict[str, Any]:
    """Ready only once the router lists a model: at least one engine discovered and answering. Its /health
    cannot tell: at vllm-stack-0.1.12 it is 200 while the discovery thread is alive
    (src/vllm_router/routers/main_router.py health(), service_discovery.py K8sPodIPServiceDiscovery
    get_health: `return self.watcher_thread.is_alive()`), engines or not; /v1/models lists the models of
    the discovered endpoints (main_router.py show_models). The exec runs the image's python3
    (python:3.12-slim), so its timeout is the LWS worker probe's (interpreter start plus the HTTP call)."""
    s = settings.policy()
    r, w = s.router, s.worker_probe
    script = ("import json, sys, urllib.request; d = json.load(urllib.request.urlopen("
              f"'http://127.0.0.1:{r.port}/v1/models', timeout={w.http_timeout_s})); "
              "sys.exit(0 if d.get('data') else 1)")
    return {"exec": {"command": ["python3", "-c", script]}, "periodSeconds": r.readiness_probe.period_s,
            "timeoutSeconds": w.timeout_s, "failureThreshold": r.readiness_probe.failure_threshold}


def deployment(namespace: str, image: str | None = None) -> dict[str, Any]:
    """`image`: the reference nodes pull (the pull-through cache's, infra/config/registry.py)."""
    r = settings.policy().router
    get = {"path": "/health", "port": "http"}
    container = {
        "name": "router",
        "image": image or settings.image("router").ref,
        "args": router_args(namespace),
        # clients send their own `Authorization: Bearer` key, which the router passes through to vLLM;
        # the router's own key lets it list models on the engines it discovers
        "env": [secret_env("VLLM_API_KEY", API_KEY_SECRET, API_KEY_SECRET_KEY), {"name": "HOME", "value": "/tmp"}],
        "ports": [{"name": "http", "containerPort": r.port, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": r.cpu_request, "memory": r.memory_request},
                      "limits": {"memory": r.memory_request}},
        "startupProbe": _probe(get, r.startup_probe),
        "readinessProbe": readiness_probe(),
        "livenessProbe": _probe(get, r.liveness_probe),
        "securityContext": container_security_context(read_only_root=True),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(NAME, namespace, LABELS),
        "spec": {
            "replicas": r.replicas,
            "selector": {"matchLabels": LABELS},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {"metadata": {"labels": LABELS}, "spec": {
                "serviceAccountName": NAME,
                "securityContext": pod_security_context(),
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": ROLE_LABEL, "operator": "In", "values": ["system"]}]}]}}},
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                     "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": LABELS}},
                    {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                     "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": LABELS}}],
                "containers": [container],
                "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": settings.policy().scratch.size_limit}}],
            }},
        },
    }


def disruption_budget(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta(NAME, namespace, LABELS),
            "spec": {"minAvailable": settings.policy().router.min_available, "selector": {"matchLabels": LABELS}}}


def service_port(namespace: str, options: DeploymentOptions, created_certificate: bool) -> int:
    """The router Service's port as clients in the cluster reach it: 443 when TLS ends on the NLB (the
    stack's tls_certificate_arn or the certificate the deployment created), else 80. Behind either the
    router itself speaks plain HTTP, so an in-cluster client uses http:// on this port."""
    certificate = "(the created certificate)" if created_certificate else None
    return int(service(namespace, options, certificate)["spec"]["ports"][0]["port"])


def service(namespace: str, options: DeploymentOptions, certificate_arn: str | None = None) -> dict[str, Any]:
    """type LoadBalancer, provisioned by the AWS Load Balancer Controller as an NLB with IP targets; TLS
    only (443) with `certificate_arn` (the stack's tls_certificate_arn, or the one the deployment created,
    infra/aws/endpoint_certificate.py), plain HTTP (80) without."""
    certificate_arn = certificate_arn or options.tls_certificate_arn
    r = settings.policy().router
    ann = {LB + "type": "external", LB + "nlb-target-type": "ip",
           LB + "scheme": "internet-facing" if options.public_endpoint else "internal"}
    spec: dict[str, Any] = {"type": "LoadBalancer", "loadBalancerClass": "service.k8s.aws/nlb",
                            "selector": LABELS}
    if options.public_endpoint:
        if not options.tls_certificate_arn:
            raise ValueError("llmcap:deployment.public_endpoint needs tls_certificate_arn")
        if not options.endpoint_allowed_cidrs:
            raise ValueError("llmcap:deployment.public_endpoint needs endpoint_allowed_cidrs (the clients' CIDRs; "
                             "write 0.0.0.0/0 to open it to everyone on purpose)")
        spec["loadBalancerSourceRanges"] = list(options.endpoint_allowed_cidrs)
    if certificate_arn:
        # TLS terminates on the NLB with the ACM certificate, internal or internet-facing alike, so the
        # bearer key never crosses the network in cleartext; the NLB -> pod hop stays inside the VPC
        ann[LB + "ssl-cert"] = certificate_arn
        ann[LB + "ssl-ports"] = str(r.https_port)
        ann[LB + "ssl-negotiation-policy"] = r.tls_policy
        spec["ports"] = [{"name": "https", "port": r.https_port, "targetPort": "http", "protocol": "TCP"}]
    else:
        spec["ports"] = [{"name": "http", "port": r.http_port, "targetPort": "http", "protocol": "TCP"}]
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta(NAME, namespace, LABELS, ann), "spec": spec}
