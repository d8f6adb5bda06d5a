"""Plain manifests and Helm values the KubernetesApp creates besides the builders of each concern
(infra/serving.py, router.py, observability.py, weights.py, netpol.py): the serving namespace, its
service accounts and secrets, the NVIDIA device plugin's values. No pulumi import."""

from __future__ import annotations

import math
from typing import Any

from infra.k8s_common import meta
from infra.names import GPU_TAINT_KEY, ROLE_LABEL


def namespace_object(name: str) -> dict[str, Any]:
    # every llmcap pod runs under the `restricted` Pod Security Standard
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(name, None, {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/audit": "restricted",
        "app.kubernetes.io/part-of": "llmcap"})}


def service_account_object(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(name, namespace)}


def secret_object(name: str, namespace: str, key: str, value: Any) -> dict[str, Any]:
    """An Opaque Secret with one key; `value` may be a pulumi Output (kept opaque here)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta(name, namespace),
            "stringData": {key: value}}


def daemonset_resources(name: str) -> dict[str, Any]:
    """Requests of a DaemonSet llmcap deploys on GPU nodes, from sizing/data/node_daemonsets.csv (the
    same rows the node-allocatable model subtracts)."""
    from sizing.planning.allocatable import daemonset_request

    d = daemonset_request(name)
    return {"requests": {"cpu": f"{d.cpu_millicores}m", "memory": f"{d.memory_mib}Mi"}}


def device_plugin_values() -> dict[str, Any]:
    # the chart's default affinity wants NFD/GFD labels, which EKS GPU nodes do not carry; our
    # node groups label GPU nodes with llmcap.io/role=gpu
    return {"resources": daemonset_resources("nvidia-device-plugin"),
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ROLE_LABEL, "operator": "In", "values": ["gpu"]}]}]}}},
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]}


def minutes(seconds: float) -> str:
    """A Pulumi custom timeout ("<n>m") of at least `seconds` seconds, in whole minutes."""
    return f"{math.ceil(seconds / 60)}m"
