"""What a stack's cluster really pulls: the one decision that the image lock's refusal, the by-tag warning, the
fit table and the pull-through-cache rules share (infra/config/image_lock.py resolve_pins, infra/program.py).
No pulumi import."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.config import settings
from infra.config.registry import CLUSTER_IMAGES
from infra.kubernetes.engines import images_in_use

if TYPE_CHECKING:
    from sizing.plan import Plan


def pulled_image_keys(plan: Plan, provisioner: str) -> tuple[str, ...]:
    """The image keys (infra/config/image_lock.py deployed_images) this plan's cluster really pulls: llmcap's own
    (images_in_use) and the pinned images of the charts it installs, so a warning or the fit table names no
    image the stack never runs."""
    # the charts installed only under a condition; every other chart with a pinned image is on every cluster
    installed = {"leaderworkerset": any(p.nodes_per_replica > 1 for p in plan.pools),  # kubernetes_app.py: LWS
                 "karpenter": provisioner == "karpenter",  # infra/program.py: Karpenter
                 "cluster_autoscaler": provisioner != "karpenter"}  # program.py: only for managed node groups
    charts = [k for k in settings.chart_keys() if settings.chart_image_pin(k) is not None and installed.get(k, True)]
    return (*images_in_use(plan, CLUSTER_IMAGES), *charts)
