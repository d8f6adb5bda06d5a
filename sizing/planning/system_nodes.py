"""The CPU system node group, sized from the plan (issue 14 item 11): the system pods' requests (router
replicas, add-ons, Prometheus growing with the nodes it scrapes; sizing/data/system_pods.csv) packed onto
nodes of the system type, at least `system_node_count` of them (platform.csv), a max the Cluster
Autoscaler can grow to, and a root volume that holds every system image. Every table is read from the
catalog given (system_pods.csv, cpu_instance_prices.csv, platform.csv, node_allocatable.csv,
node_daemonsets.csv). Pure; no pulumi import."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sizing.catalog.records import SystemPod, system_pod_from_row
from sizing.catalog.schema import bundled_table
from sizing.errors import CatalogLookupError
from sizing.plan import SystemNodePlan

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.plan import Pool

__all__ = ["SystemPod", "nat_gateway_count", "requests", "size_system_nodes", "system_pods"]


def system_pods(catalog: Catalog | None = None) -> dict[str, SystemPod]:
    """system_pods.csv of `catalog` by component (the bundled file when None: sizing.catalog.schema.bundled_table)."""
    if catalog is not None:
        return catalog.system_pods
    return {r["component"]: system_pod_from_row(r) for r in bundled_table("system_pods.csv")}


def _for_pods(catalog: Catalog, vcpus: int, mem_gib: float) -> tuple[float, float]:
    """(millicores, MiB) a system node leaves for pods: the same allocatable model as the GPU nodes
    (sizing/planning/allocatable.py: nodeadm kube-reserved, hard eviction, VM overhead, node DaemonSets; the GPU
    nodes' DaemonSet list, which also counts the device plugin, so a little conservative here)."""
    from sizing.planning.allocatable import (
        allocatable_terms,
        gpu_node_daemonsets,
        kube_reserved_cpu_millicores,
        kube_reserved_memory_mib,
        max_pods,
    )

    t = allocatable_terms(catalog)
    ds = gpu_node_daemonsets(catalog)
    cap_mem = mem_gib * 1024 * (1.0 - t["vm_memory_overhead_fraction"])
    cpu = vcpus * 1000 - kube_reserved_cpu_millicores(catalog, vcpus) - sum(d.cpu_millicores for d in ds)
    mem = (cap_mem - kube_reserved_memory_mib(catalog, max_pods(catalog, vcpus)) - t["eviction_hard_memory_mib"]
           - sum(d.memory_mib for d in ds) - t["unrequested_daemonset_memory_mib"])
    return max(cpu, 1.0), max(mem, 1.0)


def requests(catalog: Catalog, pools: list[Pool], system_nodes: int) -> tuple[int, int]:
    """Total (millicores, MiB) the system pods request with `system_nodes` system nodes."""
    pods = catalog.system_pods
    multi_node = any(p.nodes_per_replica > 1 for p in pools)
    scraped = sum(p.instances_max for p in pools) + system_nodes
    cpu = mem = 0
    for name, pod in pods.items():
        if name == "leaderworkerset" and not multi_node:
            continue
        n = scraped if name == "prometheus_per_node" else pod.replicas
        cpu += n * pod.cpu_m
        mem += n * pod.memory_mib
    return cpu, mem


def size_system_nodes(catalog: Catalog, pools: list[Pool], instance_type: str, region: str,
                      count: int | None = None) -> SystemNodePlan:
    """`count` (llmcap:deployment.system_node_count) fixes the desired size; else the requests decide.
    vCPUs and memory of `instance_type` come from cpu_instance_prices.csv (any region's row)."""
    spec = catalog.cpu_instance(instance_type, region) or catalog.cpu_instance(instance_type)
    if spec is None:
        known = sorted({c.instance_type for c in catalog.cpu_instances.values()})
        raise CatalogLookupError(f"system node type {instance_type}: no vCPU/memory figures in "
                                 f"cpu_instance_prices.csv (it has {', '.join(known)}); add a row or set "
                                 "llmcap:deployment.system_node_instance_type to one of those")
    alloc_cpu_m, alloc_mem_mib = _for_pods(catalog, spec.vcpus, spec.memory_gib)
    floor = int(catalog.number("system_node_count"))
    nodes = floor
    for _ in range(4):  # Prometheus grows with the nodes, which include the system nodes
        cpu, mem = requests(catalog, pools, nodes)
        need = max(floor, math.ceil(cpu / alloc_cpu_m), math.ceil(mem / alloc_mem_mib))
        if need == nodes:
            break
        nodes = need
    desired = count or nodes
    cpu, mem = requests(catalog, pools, desired)
    images = sum(p.image_gib for p in catalog.system_pods.values())
    return SystemNodePlan(instance_type=instance_type, desired=desired, min_size=desired,
                       max_size=max(desired + 1, math.ceil(desired * catalog.number("system_node_max_factor"))),
                       root_volume_gib=math.ceil(images + catalog.number("system_root_volume_margin_gib")),
                       cpu_m_requested=cpu, memory_mib_requested=mem)


def nat_gateway_count(offered: dict[str, tuple[str, ...]], setting: int | None, max_azs: int) -> int:
    """One NAT gateway per AZ of the VPC llmcap creates (as infra/network.choose_az_ids picks them: the
    AZs offering the planned types, at most `max_azs`, at least two); `setting` caps it."""
    azs = {az for zs in offered.values() for az in zs}
    per_az = max(2, min(len(azs), max_azs))
    return min(setting, per_az) if setting is not None else per_az
