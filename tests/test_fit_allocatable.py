"""Issue 14 defect 2: serving pods request what a GPU node really has left. The node model
(sizing/planning/allocatable.py) follows nodeadm and the EKS managed-node-group rules; every bundled stack's
rendered pods (effective requests: the larger of the init containers and the containers' sum) times
pods per node fit the node's allocatable less its DaemonSets; scaleup-a100 keeps 8 replicas per node."""

from __future__ import annotations

import pytest

from infra.kubernetes.k8s_common import serving_name
from sizing.catalog.lookup import load_catalog
from sizing.planning.allocatable import (
    kube_reserved_cpu_millicores,
    kube_reserved_memory_mib,
    max_pods,
    node_allocatable,
)
from tests.k8s_support import STACK_IDS, objects, rendered

CAT = load_catalog()


def _cpu_m(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def _mem_mib(q: str) -> int:
    for suffix, f in (("Gi", 1024), ("Mi", 1)):
        if q.endswith(suffix):
            return int(float(q[: -len(suffix)]) * f)
    raise AssertionError(q)


def effective_requests(pod: dict) -> tuple[int, int]:
    """Kubernetes' effective pod request: max(largest init container, sum of containers), per resource."""
    def req(c: dict) -> tuple[int, int]:
        r = (c.get("resources") or {}).get("requests") or {}
        return _cpu_m(r.get("cpu", "0m")), _mem_mib(r.get("memory", "0Mi"))
    cs = [req(c) for c in pod["containers"]]
    inits = [req(c) for c in pod.get("initContainers", [])]
    cpu = max([sum(c[0] for c in cs)] + [i[0] for i in inits])
    mem = max([sum(c[1] for c in cs)] + [i[1] for i in inits])
    return cpu, mem


def test_nodeadm_formulas() -> None:
    # nodeadm: 6% of the first core + 1% of the second + 0.5% of cores 3-4 + 0.25% above
    assert kube_reserved_cpu_millicores(CAT, 4) == 60 + 10 + 10
    assert kube_reserved_cpu_millicores(CAT, 96) == 60 + 10 + 10 + 92000 * 25 // 10000
    assert kube_reserved_memory_mib(CAT, 110) == 11 * 110 + 255
    assert max_pods(CAT, 4) == 110 and max_pods(CAT, 29) == 110 and max_pods(CAT, 48) == 250


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_serving_pods_fit_the_node_allocatable(stack_id: str) -> None:
    result, _ = rendered(stack_id)
    objs = objects(stack_id)
    for pool in result.plan.pools:
        node = node_allocatable(CAT, CAT.instances[pool.instance_type])
        w = next(o for o in objs if o["metadata"]["name"] == serving_name(pool.name)
                 and o["kind"] in ("Deployment", "LeaderWorkerSet"))
        pods = ([w["spec"]["template"]["spec"]] if w["kind"] == "Deployment" else
                [w["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"],
                 w["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]])
        per_node = pool.replicas_per_instance if pool.nodes_per_replica == 1 else 1
        for pod in pods:
            cpu, mem = effective_requests(pod)
            assert cpu * per_node <= node.for_pods_cpu_millicores, f"{stack_id}/{pool.name}: CPU {cpu}m × {per_node}"
            assert mem * per_node <= node.for_pods_memory_mib, f"{stack_id}/{pool.name}: memory {mem}Mi × {per_node}"


def test_a_packed_bundled_pool_keeps_every_planned_replica_per_node() -> None:
    # scaleout-l4 packs two TP2 replicas on a g6.12xlarge (scaleup-a100 packed eight until the 2026-12-03 refit)
    result, _ = rendered("scaleout-l4")
    pool = result.plan.pools[0]
    node = node_allocatable(CAT, CAT.instances[pool.instance_type])
    per = pool.replicas_per_instance
    assert per > 1
    assert pool.memory_mib_per_replica * per <= node.for_pods_memory_mib
    assert pool.cpu_millicores_per_replica * per <= node.for_pods_cpu_millicores


def test_daemonsets_llmcap_deploys_request_what_the_node_model_subtracts() -> None:
    from sizing.planning.allocatable import daemonset_request
    from tests.k8s_support import rendered

    result, _ = rendered("dev")
    releases = {r.name: r.inputs["values"] for r in result.resources if r.type == "kubernetes:helm.sh/v3:Release"}
    for name, values in (("nvidia-device-plugin", releases["nvidia-device-plugin"]),
                         ("prometheus-node-exporter", releases["kube-prometheus-stack"]["prometheus-node-exporter"])):
        d = daemonset_request(name)
        assert values["resources"]["requests"] == {"cpu": f"{d.cpu_millicores}m", "memory": f"{d.memory_mib}Mi"}


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_serving_pods_leave_a_tenth_of_the_node_for_daemonsets_added_later(stack_id: str) -> None:
    """Issue 32: the vLLM pods of a full node request at most the allocatable less today's DaemonSets less
    10% of the node's vCPUs and of its allocatable memory, so a GuardDuty or log-agent DaemonSet added
    after the deploy still schedules there."""
    result, _ = rendered(stack_id)
    objs = objects(stack_id)
    for pool in result.plan.pools:
        node = node_allocatable(CAT, CAT.instances[pool.instance_type])
        cpu_room = node.allocatable_cpu_millicores - node.daemonset_cpu_millicores - node.vcpus * 1000 // 10
        mem_room = (node.allocatable_memory_mib - node.daemonset_memory_mib) - node.allocatable_memory_mib // 10
        w = next(o for o in objs if o["metadata"]["name"] == serving_name(pool.name)
                 and o["kind"] in ("Deployment", "LeaderWorkerSet"))
        pod = w["spec"]["template"]["spec"] if w["kind"] == "Deployment" else \
            w["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
        per_node = pool.replicas_per_instance if pool.nodes_per_replica == 1 else 1
        cpu, mem = effective_requests(pod)
        assert cpu * per_node <= cpu_room, f"{stack_id}/{pool.name}: {cpu * per_node}m > {cpu_room}m"
        assert mem * per_node <= mem_room, f"{stack_id}/{pool.name}: {mem * per_node}Mi > {mem_room}Mi"


def test_the_fit_table_shows_the_reserve_for_later_daemonsets() -> None:
    from infra.fit.check import FitContext, check_deployable
    from tests import pulumi_harness as h

    result, _ = rendered("dev")
    report = check_deployable(FitContext(stack=result.stack, plan=result.plan, catalog=h.catalog()))
    pool = result.plan.pools[0]
    node = node_allocatable(CAT, CAT.instances[pool.instance_type])
    row = next(r for r in report.rows if r.get("pool") == pool.name)
    assert row["later DS reserve (m/Mi)"] == f"{node.reserve_cpu_millicores:,}/{node.reserve_memory_mib:,}"
