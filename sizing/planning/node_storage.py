"""Where one copy of a checkpoint lives on a GPU node, and how big that place must be (GiB).

The kubelet's filesystem holds the vLLM image, the model-cache emptyDir and the copy Job's scratch:
on the instance-store NVMe when nodeadm's RAID0 strategy moves containerd and the kubelet there
(llmcap:deployment.model_cache_on_instance_store), else on the root EBS volume. Pods are evicted when
that filesystem has less than `eviction_hard_nodefs_fraction` free (nodeadm evictionHard
nodefs.available 10%, sizing/data/node_allocatable.csv), so only the rest is usable. Sizes come from
sizing/data/platform.csv (vllm_image_gib, root_volume_margin_gib, model_cache_headroom_gib). Both are
read from the catalog given (the planner's), else the bundled files (infra's checks).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sizing.catalog.platform import number
from sizing.catalog.schema import bundled_table
from sizing.perf.memory import GIB

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.plan import Pool


def nodefs_eviction_fraction(catalog: Catalog | None = None) -> float:
    """The kubelet evicts pods when its filesystem has less than this fraction free (nodeadm
    evictionHard nodefs.available 10%; sizing/data/node_allocatable.csv)."""
    item = "eviction_hard_nodefs_fraction"
    if catalog is not None:
        return catalog.allocatable_term(item)
    return next(float(r["value"]) for r in bundled_table("node_allocatable.csv") if r["item"] == item)


def nvme_gib(local_nvme_gb: int) -> float:
    """The instance store in GiB (instances.csv lists decimal GB)."""
    return local_nvme_gb * 1e9 / GIB


def ephemeral_on_nvme(local_nvme_gb: int, instance_store: bool) -> bool:
    """nodeadm's RAID0 local-storage strategy moves containerd and the kubelet (emptyDirs) onto the
    instance store when llmcap:deployment.model_cache_on_instance_store is set and the type has one."""
    return instance_store and local_nvme_gb > 0


def usable_ephemeral_gib(disk_gib: float, catalog: Catalog | None = None) -> float:
    """What pods can fill on the kubelet's filesystem before the hard eviction threshold (GiB)."""
    return disk_gib * (1.0 - nodefs_eviction_fraction(catalog))


def cache_fits_nvme(local_nvme_gb: int, model_cache_gib: float, instance_store: bool,
                    catalog: Catalog | None = None) -> bool:
    """One model copy and the vLLM image fit the instance store below the eviction threshold."""
    if not ephemeral_on_nvme(local_nvme_gb, instance_store):
        return False
    return usable_ephemeral_gib(nvme_gib(local_nvme_gb), catalog) >= model_cache_gib + number("vllm_image_gib",
                                                                                                catalog)


def model_cache_gib(checkpoint_gib: float, catalog: Catalog | None = None) -> float:
    """The model-cache emptyDir of a node (GiB): the WHOLE checkpoint (`aws s3 sync` copies every
    file of the prefix, on every node of a multi-node replica too) plus headroom."""
    return checkpoint_gib + number("model_cache_headroom_gib", catalog)


def root_volume_gib(cache_gib: float, local_nvme_gb: int, instance_store: bool,
                    catalog: Catalog | None = None) -> int:
    """Root EBS volume of a GPU node (GiB). On the instance store (RAID0) containerd and emptyDirs
    live on NVMe: the OS margin and the image suffice. Otherwise the root volume holds the image and
    one model copy (the copy Job's scratch, or the cache) below the eviction threshold."""
    image, margin = number("vllm_image_gib", catalog), number("root_volume_margin_gib", catalog)
    if ephemeral_on_nvme(local_nvme_gb, instance_store):
        return math.ceil(image + margin)
    return math.ceil((image + cache_gib) / (1.0 - nodefs_eviction_fraction(catalog)) + margin)


def loading_mode(pool: Pool, instance_store: bool, catalog: Catalog | None = None) -> str:
    """How a planned pool's nodes load the weights: `nvme` when the node holds one pod of the pool, the node
    group puts the kubelet's storage on the instance-store NVMe (`llmcap:deployment.model_cache_on_instance_store`)
    and that NVMe holds one copy of the model and the image below the kubelet's eviction threshold, else
    `s3-stream` (sizing.perf.cold_start.weights_mode: at most one copy per node)."""
    from sizing.perf.weights_mode import pods_per_node, weights_mode

    fits = cache_fits_nvme(pool.local_nvme_gb, pool.model_cache_gib_per_node, instance_store, catalog)
    return "nvme" if weights_mode(pods_per_node(pool), fits) == "nvme" else "s3-stream"
