"""Plain manifests and Helm values the KubernetesApp creates besides the builders of each concern
(infra/kubernetes/serving.py, router.py, observability.py, weights.py, netpol.py): the serving namespace, its
service accounts and secrets, the NVIDIA device plugin's values. No pulumi import."""

from __future__ import annotations

import math
from typing import Any

from infra.kubernetes.k8s_common import meta


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


def minutes(seconds: float) -> str:
    """A Pulumi custom timeout ("<n>m") of at least `seconds` seconds, in whole minutes."""
    return f"{math.ceil(seconds / 60)}m"
