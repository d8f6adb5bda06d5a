"""Platform constants for infra/ (no pulumi import): infra/data/platform.yaml for infra-only
values, sizing/data/platform.csv for the figures the cost model prices too, and the root-volume
size of a pool, derived from the plan's weights and the vLLM image size."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sizing.catalog.platform import number, setting
from sizing.deployment import DeploymentOptions

if TYPE_CHECKING:
    pass

DATA_FILE = Path(__file__).parent.parent / "data" / "platform.yaml"


@dataclass(frozen=True)
class Platform:
    kubernetes_version: str
    upgrade_support_type: str
    ami_type_gpu: str
    ami_type_system: str
    root_device_name: str
    root_volume_type: str
    imds_hop_limit: int
    local_storage_strategy: str
    max_azs: int
    cluster_log_types: tuple[str, ...]
    node_update_max_unavailable: int
    kms_deletion_window_days: int
    weights_noncurrent_version_days: int
    abort_incomplete_multipart_days: int
    service_ipv4_cidr: str  # the cluster's Service range; the API server's ClusterIP is its first address
    # shared with the planner's cost model (sizing/data/platform.csv)
    system_node_instance_type: str
    system_node_count: int | None  # llmcap:deployment.system_node_count; None: sized from the plan
    nat_gateways: int | None  # llmcap:deployment.nat_gateways; None: one per AZ
    control_plane_log_retention_days: int
    vllm_image_gib: float
    root_volume_margin_gib: float


@lru_cache(maxsize=1)
def _infra_values() -> dict[str, Any]:
    doc = yaml.safe_load(DATA_FILE.read_text(encoding="utf-8"))
    return {k: v["value"] for k, v in doc.items()}


def load_platform(deployment: DeploymentOptions | None = None) -> Platform:
    """The platform constants, with the stack's `llmcap:deployment` overrides applied."""
    d = deployment or DeploymentOptions()
    v = _infra_values()
    return Platform(
        kubernetes_version=d.kubernetes_version or str(v["kubernetes_version"]),
        upgrade_support_type=str(v["upgrade_support_type"]),
        ami_type_gpu=str(v["ami_type_gpu"]), ami_type_system=str(v["ami_type_system"]),
        root_device_name=str(v["root_device_name"]), root_volume_type=str(v["root_volume_type"]),
        imds_hop_limit=int(v["imds_hop_limit"]),
        local_storage_strategy=str(v["local_storage_strategy"]),
        max_azs=int(number("max_azs")), cluster_log_types=tuple(v["cluster_log_types"]),
        node_update_max_unavailable=int(v["node_update_max_unavailable"]),
        kms_deletion_window_days=int(v["kms_deletion_window_days"]),
        weights_noncurrent_version_days=int(v["weights_noncurrent_version_days"]),
        abort_incomplete_multipart_days=int(v["abort_incomplete_multipart_days"]),
        service_ipv4_cidr=str(v["service_ipv4_cidr"]),
        system_node_instance_type=d.system_node_instance_type or setting("system_node_instance_type"),
        system_node_count=d.system_node_count,
        nat_gateways=d.nat_gateways,
        control_plane_log_retention_days=int(number("control_plane_log_retention_days")),
        vllm_image_gib=number("vllm_image_gib"), root_volume_margin_gib=number("root_volume_margin_gib"),
    )


