"""Deployability rules of issue 28: capacity and the fabric a pool needs.

`multi-node-without-efa`: a pool whose replica spans several nodes runs NCCL between them (vLLM's
pipeline parallel over the network); without EFA, NCCL falls back to TCP sockets ("NET/Socket"), far
below the fabric the P-family price includes, so the program refuses it instead of deploying it slow.
EFA comes from the catalog's `efa` column (sizing/data/instances.csv, DescribeInstanceTypes
EfaSupported) and the network cards in infra/data/efa_network_cards.csv (infra/aws/efa.py).

`karpenter-limits` / `karpenter-multi-node-without-efa` (provisioner karpenter): a pool's NodePool limits
admit the nodes its replicas_max needs; a multi-node pool on Karpenter is refused unless it is on EFA (its pods
request vpc.amazonaws.com/efa, so Karpenter attaches the interfaces; its EC2NodeClass names a placement group).

`efa-unallocatable`: a serving pod requests no more vpc.amazonaws.com/efa than its node advertises.
The other rules (allocatable, GPUs per node, storage) read the plan's pool and apply to both provisioners.

`multi-node-nccl-sockets`: a multi-node pool on EFA whose engine image has no aws-ofi-nccl (the plan's fabric
"efa-sockets", sizing/data/nccl_net_plugins.csv) would run NCCL over TCP sockets on one network card: refused,
naming the fix, unless the stack accepts it with `llmcap:deployment.allow_nccl_sockets: true`.

`reservation-type-mismatch`: a pool on a reservation must be the reservation's instance type (the
planner places it so; a hand-edited saved plan could break it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from infra.aws.efa import efa_cards, instance_has_efa, uses_efa
from infra.config.efa_cards import EFA_RESOURCE, efa_interfaces, pool_uses_efa
from infra.fit.check import FitContext, FitProblem, fit_row, fit_rule
from infra.fit.rules import pool_views
from infra.karpenter.nodes import GPU_RESOURCE, instances_for_replicas_max, karpenter_pools, nodepool_limits
from infra.kubernetes import efa_plugin
from infra.kubernetes.nccl_env import nccl_transport

if TYPE_CHECKING:
    from sizing.plan import Pool

SRC_EFA = ("https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html; NCCL without an EFA (libfabric) "
           "network plugin uses its socket transport (aws-ofi-nccl README)")


@fit_rule("multi-node-without-efa")
def multi_node_without_efa(fit: FitContext) -> Iterator[FitProblem]:
    for p in fit.plan.pools:
        if p.nodes_per_replica <= 1:
            continue
        if not instance_has_efa(fit.catalog, p.instance_type):
            why = f"{p.instance_type} has no EFA (sizing/data/instances.csv efa)"
        elif p.instance_type not in efa_cards():
            why = f"{p.instance_type} has no row in infra/data/efa_network_cards.csv (scripts/build_bundled_catalog.py)"
        elif not pool_uses_efa(p):
            why = (f"the plan assumed {p.inter_node_fabric or 'no stated'} fabric between them (a plan saved before "
                   "it said which: re-plan with `llmcap plan STACK --write`)")
        else:
            continue
        yield FitProblem("multi-node-without-efa", p.name,
                         f"each replica spans {p.nodes_per_replica} nodes but {why}: NCCL would fall back to TCP "
                         "sockets between nodes; allow an instance type with EFA (llmcap:hardware.instance_types) "
                         "or a precision whose replica fits one node", SRC_EFA)


SRC_NCCL_PLUGIN = ("aws-ofi-nccl README: without the libfabric NCCL net plugin NCCL uses its socket transport; "
                   "sizing/data/nccl_net_plugins.csv says which pinned engine images carry it, and why not")


@fit_rule("multi-node-nccl-sockets")
def multi_node_nccl_sockets(fit: FitContext) -> Iterator[FitProblem]:
    if fit.stack.deployment.allow_nccl_sockets:
        return
    for p in fit.plan.pools:
        if p.nodes_per_replica <= 1 or p.inter_node_fabric != "efa-sockets" or not pool_uses_efa(p):
            continue
        yield FitProblem("multi-node-nccl-sockets", p.name,
                         f"each replica spans {p.nodes_per_replica} nodes on EFA but the {p.engine} image has no "
                         f"aws-ofi-nccl, so NCCL would use TCP sockets at {p.inter_node_gbps:,.0f} Gbps per node: "
                         "pin an engine image that carries it in infra/data/versions.yaml and mark it yes in "
                         "sizing/data/nccl_net_plugins.csv (its row says why the pinned one has none), or accept "
                         "sockets with llmcap:deployment.allow_nccl_sockets: true", SRC_NCCL_PLUGIN)


SRC_EFA_ALLOCATABLE = ("the kubelet schedules a pod only onto a node whose allocatable covers each extended resource "
                       "it "
                       "requests; the EFA device plugin (eks-charts aws-efa-k8s-device-plugin v0.5.30) advertises "
                       "vpc.amazonaws.com/efa only on the nodes its DaemonSet selects (supportedInstanceLabels), one "
                       "per EFA interface the node has")


def efa_allocatable(fit: FitContext, pool: Pool) -> int:
    """`vpc.amazonaws.com/efa` a node of the pool advertises where the EFA device plugin runs on it (else 0): on a
    managed node group the interfaces its launch template attaches (infra/aws/efa.py); on Karpenter the instance
    type's EFA capacity, which Karpenter attaches when the pods request the resource (SRC_KARPENTER_EFA)."""
    if pool.instance_type not in efa_plugin.plugin_instance_types(fit.plan) or not uses_efa(fit.catalog, pool):
        return 0
    if pool in karpenter_pools(fit.stack.deployment.provisioner, fit.plan.pools):
        cards = efa_cards().get(pool.instance_type)
        return cards.max_efa_interfaces if cards else 0
    return efa_interfaces(pool.instance_type)


@fit_rule("efa-unallocatable")
def efa_unallocatable(fit: FitContext) -> Iterator[FitProblem]:
    """A serving pod requesting more vpc.amazonaws.com/efa than its node advertises never schedules."""
    for v in pool_views(fit):
        have = efa_allocatable(fit, v.pool)
        for role, pod in v.pods:
            need = sum(int((c.get("resources") or {}).get("requests", {}).get(EFA_RESOURCE, 0))
                       for c in pod.get("containers", []))
            if need > have:
                yield FitProblem("efa-unallocatable", v.pool.name,
                                 f"the {role} pod requests {need} {EFA_RESOURCE} but a {v.pool.instance_type} node "
                                 f"advertises {have} (EFA device plugin on the node: "
                                 f"{'yes' if have else 'no'}); the pod would stay Pending: install the plugin on "
                                 "these nodes (infra/kubernetes/efa_plugin.py) or attach the interfaces",
                                 SRC_EFA_ALLOCATABLE)


@fit_row
def _efa_rows(fit: FitContext) -> dict[str, dict[str, object]]:
    """Multi-node pools: the EFA devices a pod requests against what its node advertises, and how NCCL moves the
    traffic between the nodes (infra/kubernetes/nccl_env.py): over aws-ofi-nccl, or over sockets and why."""
    out: dict[str, dict[str, object]] = {}
    for v in pool_views(fit):
        if v.pool.nodes_per_replica <= 1:
            continue
        need = max(sum(int((c.get("resources") or {}).get("requests", {}).get(EFA_RESOURCE, 0))
                       for c in pod.get("containers", [])) for _, pod in v.pods)
        transport = nccl_transport(v.pool)
        if v.pool.inter_node_fabric == "efa-sockets" and fit.stack.deployment.allow_nccl_sockets:
            transport += "; accepted by llmcap:deployment.allow_nccl_sockets"
        out[v.pool.name] = {"EFA req/node": f"{need}/{efa_allocatable(fit, v.pool)}",
                            "NCCL between nodes": transport}
    return out


@fit_rule("reservation-type-mismatch")
def reservation_type_mismatch(fit: FitContext) -> Iterator[FitProblem]:
    held = {c.id: c for c in fit.plan.hardware.capacity}
    for p in fit.plan.pools:
        if not p.capacity_reservation_id:
            continue
        res = held.get(p.capacity_reservation_id)
        if res is None or res.instance_type != p.instance_type or p.instances_max > res.count:
            have = f"{res.count} × {res.instance_type}" if res else "no such entry in llmcap:hardware.capacity"
            yield FitProblem("reservation-type-mismatch", p.name,
                             f"runs up to {p.instances_max} × {p.instance_type} on {p.capacity_reservation_id} "
                             f"({have}); re-plan with `llmcap plan STACK --write`", "llmcap plan (issue 28)")


SRC_KARPENTER_LIMITS = ("Karpenter v1.14 concepts/nodepools.md spec.limits: the NodePool launches no node once its "
                        "nodes' resources reach a limit (infra/karpenter/nodes.py nodepool_limits)")
SRC_KARPENTER_EFA = ("Karpenter v1.14.1 pkg/providers/instance/instance.go getEFACountForInstance: EFA interfaces only "
                     "when the pod requests vpc.amazonaws.com/efa or the EC2NodeClass lists networkInterfaces, as many "
                     "as the instance type's vpc.amazonaws.com/efa capacity (launchtemplate.go, one per network card)")


@fit_rule("karpenter-limits")
def karpenter_limits(fit: FitContext) -> Iterator[FitProblem]:
    """A Karpenter pool's NodePool limits (GPUs, vCPUs) admit the nodes its replicas_max needs."""
    for p in karpenter_pools(fit.stack.deployment.provisioner, fit.plan.pools):
        inst = fit.catalog.instances.get(p.instance_type)
        if inst is None:
            continue  # unknown type: the catalog rules report it
        limits = nodepool_limits(p, inst.vcpus)
        nodes = instances_for_replicas_max(p)
        need = {GPU_RESOURCE: nodes * p.gpus_per_instance, "cpu": nodes * inst.vcpus}
        short = [f"{k} {limits[k]} < {v}" for k, v in need.items() if int(limits[k]) < v]
        if short:
            yield FitProblem("karpenter-limits", p.name,
                             f"NodePool limits admit {p.instances_max} × {p.instance_type} but replicas_max "
                             f"{p.replicas_max} needs {nodes} nodes ({', '.join(short)}); re-plan with "
                             "`llmcap plan STACK --write`", SRC_KARPENTER_LIMITS)


@fit_rule("karpenter-multi-node-without-efa")
def karpenter_multi_node(fit: FitContext) -> Iterator[FitProblem]:
    """A multi-node pool on Karpenter gets EFA only when its pods request vpc.amazonaws.com/efa (pool_uses_efa:
    the plan put it on EFA); otherwise its nodes come up without EFA and it is refused, as elsewhere."""
    for p in karpenter_pools(fit.stack.deployment.provisioner, fit.plan.pools):
        if p.nodes_per_replica > 1 and not pool_uses_efa(p):
            yield FitProblem("karpenter-multi-node-without-efa", p.name,
                             f"each replica spans {p.nodes_per_replica} nodes, but the plan put the pool on "
                             f"{p.inter_node_fabric or 'no stated'} fabric, so its pods request no "
                             f"{EFA_RESOURCE} and Karpenter attaches no EFA interfaces: NCCL would fall back to TCP "
                             "sockets; allow an instance type with EFA (llmcap:hardware.instance_types) and re-plan "
                             "with `llmcap plan STACK --write`", SRC_KARPENTER_EFA)
