"""What a GPU node has left for llmcap's serving pods: a model of the kubelet's allocatable on EKS
Amazon Linux 2023 managed node groups (nodeadm), less the DaemonSets every GPU node runs.

Every term is a data row with its source (sizing/data/node_allocatable.csv, node_daemonsets.csv):

- capacity memory = instance memory × (1 − VM overhead 7.5%): the kernel and firmware hide part of
  the RAM from the kubelet (Karpenter's VM_MEMORY_OVERHEAD_PERCENT default)
- maxPods = 110 below 30 vCPUs, else 250 (the managed-node-group cap EKS writes into the user data)
- kube-reserved memory = 11 MiB × maxPods + 255 MiB; kube-reserved CPU = 6% of the first core, 1% of
  the second, 0.5% of cores 3-4, 0.25% above (nodeadm getMemoryMebibytesToReserve / getCPUMillicoresToReserve)
- hard eviction threshold memory.available 100Mi
- DaemonSet requests on GPU nodes, plus an allowance for add-on containers that request no memory
- a reserve for DaemonSets added after the deploy: 10% of the node's vCPUs and of its allocatable memory
  (llmcap policy, issue 32), which the serving pods' requests leave free

The planner (sizing/planning/builder.py) splits `for_pods_*` between a node's replicas; infra/ only checks
(infra/fit/rules.py). Units: millicores (CPU), MiB (memory), per node unless named per replica.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.catalog.records import DaemonSetRequest, daemonset_from_row
from sizing.catalog.schema import bundled_table

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import Instance

__all__ = ["DaemonSetRequest", "NodeAllocatable", "allocatable_terms", "daemonset_request", "gpu_node_daemonsets",
           "kube_reserved_cpu_millicores", "kube_reserved_memory_mib", "max_pods", "node_allocatable",
           "per_replica_requests"]

DAEMONSETS_FILE = "node_daemonsets.csv"
TERMS = ("kube_reserved_memory_mib_per_pod", "kube_reserved_memory_mib_base", "kube_reserved_cpu_first_core",
         "kube_reserved_cpu_second_core", "kube_reserved_cpu_cores_3_4", "kube_reserved_cpu_above_4",
         "eviction_hard_memory_mib", "eviction_hard_nodefs_fraction", "max_pods_below_vcpu_threshold",
         "max_pods_at_or_above_vcpu_threshold", "max_pods_vcpu_threshold", "vm_memory_overhead_fraction",
         "unrequested_daemonset_memory_mib", "later_daemonsets_cpu_fraction", "later_daemonsets_memory_fraction")


def allocatable_terms(catalog: Catalog) -> dict[str, float]:
    """The model's terms from the catalog's node_allocatable.csv; a missing one is a CatalogDataError."""
    for item in TERMS:
        catalog.allocatable_term(item)
    return catalog.allocatable_terms


def gpu_node_daemonsets(catalog: Catalog, efa: bool = False) -> tuple[DaemonSetRequest, ...]:
    """The DaemonSets that run on a GPU node, with their requests (node_daemonsets.csv): those on every GPU node,
    and with `efa` (a node of a pool on EFA, where llmcap installs the EFA device plugin) those marked
    `only_on_efa_nodes` too."""
    return tuple(d for d in catalog.node_daemonsets if d.on_gpu_nodes and (efa or not d.only_on_efa_nodes))


def daemonset_request(name: str, catalog: Catalog | None = None) -> DaemonSetRequest:
    """One GPU-node DaemonSet's requests (node_daemonsets.csv of `catalog`; the bundled file when None:
    sizing.catalog.schema.bundled_table)."""
    rows = catalog.node_daemonsets if catalog is not None else \
        tuple(daemonset_from_row(r) for r in bundled_table(DAEMONSETS_FILE))
    for d in rows:
        if not d.on_gpu_nodes:
            continue
        if d.name == name:
            return d
    raise KeyError(name)


def max_pods(catalog: Catalog, vcpus: int) -> int:
    """The maxPods an EKS managed node group gives a node of `vcpus` vCPUs."""
    t = allocatable_terms(catalog)
    below = vcpus < t["max_pods_vcpu_threshold"]
    return int(t["max_pods_below_vcpu_threshold"] if below else t["max_pods_at_or_above_vcpu_threshold"])


def kube_reserved_cpu_millicores(catalog: Catalog, vcpus: int) -> int:
    """nodeadm's kube-reserved CPU for a node of `vcpus` vCPUs (integer arithmetic, as nodeadm does)."""
    t = allocatable_terms(catalog)
    total = vcpus * 1000
    ranges = [0, 1000, 2000, 4000, total]
    shares = [int(t["kube_reserved_cpu_first_core"]), int(t["kube_reserved_cpu_second_core"]),
              int(t["kube_reserved_cpu_cores_3_4"]), int(t["kube_reserved_cpu_above_4"])]
    out = 0
    for i, share in enumerate(shares):
        start, end = ranges[i], ranges[i + 1]
        if total <= start:
            continue
        out += (min(total, end) - start) * share // 10000
    return out


def kube_reserved_memory_mib(catalog: Catalog, pods: int) -> int:
    t = allocatable_terms(catalog)
    return int(t["kube_reserved_memory_mib_per_pod"]) * pods + int(t["kube_reserved_memory_mib_base"])


@dataclass(frozen=True)
class NodeAllocatable:
    """One GPU node of `instance_type`: capacity, what the kubelet keeps, and what is left for pods."""

    instance_type: str
    vcpus: int
    instance_memory_mib: int
    max_pods: int
    capacity_cpu_millicores: int
    capacity_memory_mib: int  # after the VM overhead
    kube_reserved_cpu_millicores: int
    kube_reserved_memory_mib: int
    eviction_memory_mib: int
    allocatable_cpu_millicores: int  # what the kubelet reports as allocatable
    allocatable_memory_mib: int
    daemonset_cpu_millicores: int
    daemonset_memory_mib: int  # requests plus the allowance for containers without a memory request
    reserve_cpu_millicores: int  # left free for DaemonSets added later (later_daemonsets_cpu_fraction of capacity)
    reserve_memory_mib: int  # likewise, of the allocatable memory
    for_pods_cpu_millicores: int  # allocatable less DaemonSets and the reserve: what serving pods may request
    for_pods_memory_mib: int


def node_allocatable(catalog: Catalog, instance: Instance, efa: bool = False) -> NodeAllocatable:
    """One GPU node's allocatable model; `efa`: the node runs the EFA-only DaemonSets (gpu_node_daemonsets)."""
    t = allocatable_terms(catalog)
    pods = max_pods(catalog, instance.vcpus)
    mem = int(instance.memory_gib * 1024)
    cap_mem = int(mem * (1.0 - t["vm_memory_overhead_fraction"]))
    cap_cpu = instance.vcpus * 1000
    kr_cpu = kube_reserved_cpu_millicores(catalog, instance.vcpus)
    kr_mem = kube_reserved_memory_mib(catalog, pods)
    evict = int(t["eviction_hard_memory_mib"])
    alloc_cpu = cap_cpu - kr_cpu
    alloc_mem = cap_mem - kr_mem - evict
    ds = gpu_node_daemonsets(catalog, efa)
    ds_cpu = sum(d.cpu_millicores for d in ds)
    ds_mem = sum(d.memory_mib for d in ds) + int(t["unrequested_daemonset_memory_mib"])
    reserve_cpu = math.ceil(cap_cpu * t["later_daemonsets_cpu_fraction"])
    reserve_mem = math.ceil(alloc_mem * t["later_daemonsets_memory_fraction"])
    return NodeAllocatable(
        instance_type=instance.instance_type, vcpus=instance.vcpus, instance_memory_mib=mem, max_pods=pods,
        capacity_cpu_millicores=cap_cpu, capacity_memory_mib=cap_mem, kube_reserved_cpu_millicores=kr_cpu,
        kube_reserved_memory_mib=kr_mem, eviction_memory_mib=evict, allocatable_cpu_millicores=alloc_cpu,
        allocatable_memory_mib=alloc_mem, daemonset_cpu_millicores=ds_cpu, daemonset_memory_mib=ds_mem,
        reserve_cpu_millicores=reserve_cpu, reserve_memory_mib=reserve_mem,
        for_pods_cpu_millicores=max(alloc_cpu - ds_cpu - reserve_cpu, 0),
        for_pods_memory_mib=max(alloc_mem - ds_mem - reserve_mem, 0))


CPU_STEP_MILLICORES = 100
MEMORY_STEP_MIB = 256


def per_replica_requests(catalog: Catalog, instance: Instance, replicas_per_node: int,
                         efa: bool = False) -> tuple[int, int]:
    """(CPU millicores, memory MiB) one serving pod requests: the node's `for_pods` split between its
    replicas, rounded down to 100m / 256Mi so every pod fits. 0 when nothing is left (the plan is then
    refused by the deployability check, never silently floored)."""
    node = node_allocatable(catalog, instance, efa)
    n = max(replicas_per_node, 1)
    cpu = node.for_pods_cpu_millicores // n // CPU_STEP_MILLICORES * CPU_STEP_MILLICORES
    mem = node.for_pods_memory_mib // n // MEMORY_STEP_MIB * MEMORY_STEP_MIB
    return cpu, mem
