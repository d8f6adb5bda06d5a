"""What a stack's cluster really pulls: the one decision that the image lock's refusal, the by-tag warning, the
fit table and the pull-through-cache rules share (infra/config/image_lock.py resolve_pins, infra/program.py).
No pulumi import."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.config import settings
from infra.config.registry import CLUSTER_IMAGES
from infra.kubernetes.efa_plugin import plugin_instance_types
from infra.kubernetes.engines import images_in_use

if TYPE_CHECKING:
    from sizing.plan import Plan


def installed_chart_keys(plan: Plan, provisioner: str) -> tuple[str, ...]:
    """The versions.yaml charts this plan's cluster installs: LWS only with multi-node pools, the EFA device plugin
    only with a pool on EFA (infra/kubernetes/efa_plugin.py), Karpenter or the Cluster Autoscaler by provisioner;
    every other chart on every cluster."""
    installed = {"leaderworkerset": any(p.nodes_per_replica > 1 for p in plan.pools),  # kubernetes_app.py: LWS
                 "aws_efa_device_plugin": bool(plugin_instance_types(plan)),  # kubernetes_app.py: EFA plugin
                 "karpenter": provisioner == "karpenter",  # infra/program.py: Karpenter
                 "cluster_autoscaler": provisioner != "karpenter"}  # program.py: only for managed node groups
    return tuple(k for k in settings.chart_keys() if installed.get(k, True))


def pulled_image_keys(plan: Plan, provisioner: str) -> tuple[str, ...]:
    """The image keys (infra/config/image_lock.py deployed_images) this plan's cluster really pulls: llmcap's own
    (images_in_use) and the pinned images of the charts it installs, so a warning or the fit table names no
    image the stack never runs."""
    charts = [k for k in installed_chart_keys(plan, provisioner) if settings.chart_image_pin(k) is not None]
    return (*images_in_use(plan, CLUSTER_IMAGES), *charts)
