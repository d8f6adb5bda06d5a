"""Issue 14 defect 5: a LeaderWorkerSet keeps each group's pods in one zone by preference, never by
LWS's exclusive placement (`leaderworkerset.sigs.k8s.io/exclusive-topology` adds a REQUIRED pod
anti-affinity: one group per zone, kubernetes-sigs/lws pkg/webhooks/pod_webhook.go SetExclusiveAffinities);
workers get probes so a hung worker restarts its group; the PDB never asks for more pods than the node
group can run, and the node group's max leaves room for a rolling update's surge group."""

from __future__ import annotations

import math

from infra.kubernetes.k8s_common import serving_name
from tests.k8s_support import find, objects, rendered

GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"


def _lws() -> tuple[object, dict]:
    result, _ = rendered("llama405b")
    pool = result.plan.pools[0]
    return pool, find(objects("llama405b"), "LeaderWorkerSet", serving_name(pool.name))


def test_no_exclusive_topology_annotation() -> None:
    _, lws = _lws()
    annotations = lws["metadata"].get("annotations") or {}
    assert not [k for k in annotations if "exclusive-topology" in k], annotations


def test_workers_prefer_their_group_zone() -> None:
    _, lws = _lws()
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    pod_affinity = worker["affinity"].get("podAffinity") or {}
    assert not pod_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    preferred = pod_affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    terms = [p["podAffinityTerm"] for p in preferred]
    assert any(t["topologyKey"] == "topology.kubernetes.io/zone" and GROUP_KEY in t.get("matchLabelKeys", [])
               for t in terms), terms
    assert not (worker["affinity"].get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")


def test_workers_have_startup_and_liveness_probes() -> None:
    _, lws = _lws()
    c = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert "livenessProbe" in c and "startupProbe" in c, sorted(c)
    assert lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"


def test_pdb_and_node_group_max_fit_what_can_run() -> None:
    for stack_id in ("llama405b", "llama70b", "dev"):
        result, _ = rendered(stack_id)
        objs = objects(stack_id)
        for pool in result.plan.pools:
            pdb = find(objs, "PodDisruptionBudget", serving_name(pool.name))["spec"]["minAvailable"]
            if pool.nodes_per_replica > 1:
                runnable_groups = pool.instances_max // pool.nodes_per_replica
                runnable = min(runnable_groups, pool.replicas) * pool.nodes_per_replica
                surge_nodes = (pool.replicas + 1) * pool.nodes_per_replica
            else:
                runnable = min(pool.instances_max * pool.replicas_per_instance, pool.replicas)
                surge_nodes = math.ceil((pool.replicas + 1) / pool.replicas_per_instance)
            assert pdb <= runnable, f"{stack_id}/{pool.name}: PDB {pdb} > runnable {runnable}"
            assert pool.instances_max >= surge_nodes, f"{stack_id}/{pool.name}: max < {surge_nodes}"
