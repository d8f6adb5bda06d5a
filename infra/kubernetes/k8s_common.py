"""Shared pieces of the Kubernetes objects: names, labels, the hardened security contexts.
Plain dicts in the camelCase form the API server takes; no pulumi import."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from infra.config import settings
from infra.config.names import POOL_LABEL

if TYPE_CHECKING:
    from sizing.plan import Pool

APP_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
PART_OF_LABEL = "app.kubernetes.io/part-of"
ENDPOINT_LABEL = "llmcap.io/endpoint"  # "true" on pods that serve HTTP (single-node pods, LWS leaders)

API_KEY_SECRET = "vllm-api-key"
API_KEY_SECRET_KEY = "api-key"
HF_TOKEN_SECRET = "hf-token"
HF_TOKEN_SECRET_KEY = "token"
# above 10000: no clash with a UID the node or a base image defines (checkov CKV_K8S_40)
RUN_AS_UID = 10001

# where the metrics live: the kube-prometheus-stack release's namespace, and the Service the Prometheus
# Operator creates for every Prometheus it runs (read by the dashboards, KEDA's trigger, the policies)
MONITORING_NAMESPACE = settings.chart("kube_prometheus_stack").namespace
PROMETHEUS_URL = f"http://prometheus-operated.{MONITORING_NAMESPACE}.svc:9090"
POOL_METRIC_LABEL = "pool"  # the scrape relabelling's pool label on every vLLM series


def cache_size_limit(pool: Pool) -> str:
    """The model-cache emptyDir's size limit of a pool's node: one whole checkpoint copy as the plan sized it."""
    return f"{math.ceil(pool.model_cache_gib_per_node)}Gi"


def dns_name(text: str, limit: int = 63) -> str:
    """A DNS-1123 label from any text (pool names such as `g6.12xlarge` or `p5-48xlarge`)."""
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return s[:limit].rstrip("-") or "x"


def serving_name(pool_name: str) -> str:
    return dns_name(f"vllm-{pool_name}", 52)  # LWS appends group/worker indexes


def serving_labels(pool_name: str) -> dict[str, str]:
    return {APP_LABEL: "vllm", COMPONENT_LABEL: "serving", PART_OF_LABEL: "llmcap", POOL_LABEL: pool_name}


def meta(name: str, namespace: str | None, labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name}
    if namespace:
        m["namespace"] = namespace
    if labels:
        m["labels"] = dict(labels)
    if annotations:
        m["annotations"] = dict(annotations)
    return m


def pod_security_context() -> dict[str, Any]:
    """Satisfies the `restricted` Pod Security Standard the namespace enforces."""
    return {"runAsNonRoot": True, "runAsUser": RUN_AS_UID, "runAsGroup": RUN_AS_UID, "fsGroup": RUN_AS_UID,
            "seccompProfile": {"type": "RuntimeDefault"}}


def container_security_context(read_only_root: bool) -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": read_only_root, "runAsNonRoot": True}


def secret_env(name: str, secret: str, key: str, optional: bool = False) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}
