"""The EFA device plugin (eks-charts aws-efa-k8s-device-plugin, pinned in infra/data/versions.yaml): a DaemonSet
that advertises each node's EFA interfaces to the kubelet as `vpc.amazonaws.com/efa`, so a serving pod that
requests them (infra/kubernetes/serving.py) is scheduled onto a node that has them and gets the devices.
Installed only when the plan has a pool on EFA (infra/config/efa_cards.py pool_uses_efa), on those pools'
instance types only, tolerating the GPU taint. Pure builder: no pulumi import.

Its image is EKS's own, in EKS's private ECR registry of each region (infra/data/eks_addon_registries.csv, the
EKS user guide's table); the nodes pull it with the node role (versions.yaml `images_not_locked` says why it
is neither cached nor locked).
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.config import settings
from infra.config.efa_cards import pool_uses_efa
from infra.config.names import GPU_TAINT_KEY, ROLE_LABEL
from sizing.errors import SpecError
from sizing.planning.allocatable import daemonset_request

if TYPE_CHECKING:
    from sizing.plan import Plan

KEY = "aws_efa_device_plugin"
REGISTRIES = Path(__file__).parent.parent / "data" / "eks_addon_registries.csv"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"  # the chart's supportedInstanceLabels.keys default
DAEMONSET = "aws-efa-k8s-device-plugin"  # its row in sizing/data/node_daemonsets.csv


def requests() -> dict[str, str]:
    """The DaemonSet's requests: its node_daemonsets.csv row (the chart's values.yaml resources.requests), set
    explicitly so the rendered values and the node model (sizing/planning/allocatable.py) are the same figures."""
    d = daemonset_request(DAEMONSET)
    return {"cpu": f"{d.cpu_millicores}m", "memory": f"{d.memory_mib}Mi"}


@functools.cache
def _registries() -> dict[str, str]:
    with REGISTRIES.open(newline="") as f:
        return {r["region"]: r["registry"] for r in csv.DictReader(f)}


def eks_registry(region: str) -> str:
    """EKS's ECR registry host for add-on images in `region` (eks_addon_registries.csv)."""
    reg = _registries().get(region)
    if reg is None:
        raise SpecError(f"aws:region {region!r} has no EKS add-on image registry in "
                        "infra/data/eks_addon_registries.csv (the EKS user guide's add-ons-images table); "
                        "add its row or choose a listed region")
    return reg


def plugin_instance_types(plan: Plan) -> list[str]:
    """The instance types of the plan's pools on EFA, sorted: the nodes the plugin runs on ([]: no plugin)."""
    return sorted({p.instance_type for p in plan.pools if pool_uses_efa(p)})


def device_plugin_values(region: str, instance_types: list[str]) -> dict[str, Any]:
    """The chart's values: EKS's image of the region at the chart's appVersion, the DaemonSet's required node
    affinity narrowed to `instance_types` (supportedInstanceLabels) and our GPU nodes, the GPU taint tolerated."""
    return {
        "image": {"repository": f"{eks_registry(region)}/{settings.chart_field(KEY, 'image_path')}",
                  "tag": settings.chart_app_version(KEY)},
        "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL], "values": list(instance_types)},
        "nodeSelector": {ROLE_LABEL: "gpu"},
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        "resources": {"requests": requests()},
    }
