"""Metrics: the kube-prometheus-stack release in its own namespace with a generated Grafana admin
Secret, the PodMonitor that scrapes every vLLM pod and the Grafana dashboard of the plan's predicted
figures (infra/kubernetes/observability.py). Exposes `metrics` (the release: KEDA's Prometheus trigger needs it)."""

from __future__ import annotations

import secrets as pysecrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s

from infra.config import settings
from infra.kubernetes import observability
from infra.kubernetes.components import apply
from infra.kubernetes.k8s_common import meta

if TYPE_CHECKING:
    from sizing.plan import Plan


@dataclass
class ObservabilityArgs:
    # the whole plan: the dashboard draws every pool's predicted figures, and Prometheus is sized for
    # the nodes it scrapes (the pools' instances_max)
    plan: Plan
    namespace: str  # the serving namespace (the PodMonitor and the dashboard ConfigMap live there)
    namespace_ready: Sequence[pulumi.Resource]
    # as the system node group was sized for them (infra/kubernetes/components/kubernetes_app.py)
    prometheus_requests: dict[str, str]
    node_exporter: dict[str, Any]  # its resources, as the node-allocatable model subtracts them
    volume_gib: int = 0  # Prometheus's PersistentVolume and the share its blocks may fill
    # (sizing/planning/metrics_storage.py, resolved by infra/kubernetes/components/kubernetes_app.py)
    retention_size_gib: int = 0
    volume_type: str = "gp3"  # EBS volume type (infra/data/platform.yaml root_volume_type)


class Observability(apply.MovedOutOfApp):
    metrics: k8s.helm.v3.Release

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("Observability", name, opts)
        c = settings.chart("kube_prometheus_stack")
        mon = apply.create({"apiVersion": "v1", "kind": "Namespace", "metadata": meta(c.namespace, None)},
                           self.child())
        storage = apply.create(observability.storage_class(args.volume_type), self.child())
        # generated once; later runs keep the first value (ignore_changes), so Grafana's login is stable
        password = pysecrets.token_urlsafe(settings.policy().observability.grafana_password_bytes)
        admin = apply.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                              "metadata": meta(observability.GRAFANA_ADMIN_SECRET, c.namespace),
                              "stringData": {"admin-user": "admin", "admin-password": pulumi.Output.secret(password)}},
                             self.child([mon], ignore_changes=["stringData"]))
        self.metrics = k8s.helm.v3.Release(
            c.name, name=c.name, chart=c.chart, version=c.version, namespace=c.namespace, create_namespace=False,
            values=observability.kube_prometheus_values(args.prometheus_requests, args.node_exporter,
                                                        args.volume_gib, args.retention_size_gib),
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=c.repo) if c.repo else None,
            opts=self.child([mon, admin, storage]))
        apply.create(observability.pod_monitor(args.namespace), self.child([*args.namespace_ready, self.metrics]))
        apply.create(observability.dashboard_config_map(args.plan, args.namespace), self.child(args.namespace_ready))
        self.register_outputs({})
