"""Weights copied at most once per node (issue 32): a node that holds one pod of a pool keeps one copy on
its NVMe; a node packed with several replicas (llama70b and scaleup-a100: 8 per node) streams them from S3
with the Run:ai model streamer instead of syncing one copy per pod, and the plan's cold start and the
startup probe count the pods that share the node's S3 throughput."""

from __future__ import annotations

from typing import Any

import pytest

from sizing.perf.cold_start import cold_start
from sizing.perf.weights_mode import pods_per_node
from sizing.planning.node_storage import loading_mode
from tests import pulumi_harness as h
from tests.k8s_support import rendered
from tests.plan_factory import make_pool


def serving_pod_specs(stack_id: str) -> list[tuple[str, dict[str, Any]]]:
    from infra.kubernetes.manifests import kubernetes_objects
    from infra.render import resources_document

    out = []
    for obj in kubernetes_objects(resources_document(rendered(stack_id)[0])):
        kind = obj.get("kind")
        if kind == "Deployment" and obj["metadata"]["name"].startswith("vllm-"):
            out.append((obj["metadata"]["name"], obj["spec"]["template"]["spec"]))
        elif kind == "LeaderWorkerSet":
            tpl = obj["spec"]["leaderWorkerTemplate"]
            for part in ("leaderTemplate", "workerTemplate"):
                if part in tpl:
                    out.append((f"{obj['metadata']['name']}/{part}", tpl[part]["spec"]))
    return out


@pytest.mark.parametrize("stack_id", h.BUNDLED_STACKS)
def test_no_node_holds_more_than_one_copy_of_the_weights(stack_id: str) -> None:
    result = rendered(stack_id)[0]
    pools = {p.name: p for p in result.plan.pools}
    for name, spec in serving_pod_specs(stack_id):
        pool = next(p for n, p in pools.items() if n in name)
        syncs = [c for c in spec.get("initContainers", []) if c["name"] == "weights-sync"]
        copies_per_node = len(syncs) * pods_per_node(pool)
        assert copies_per_node <= 1, f"{stack_id} {name}: {copies_per_node} copies of the weights per node"
        if not syncs:
            args = " ".join(spec["containers"][0].get("args", []) + spec["containers"][0].get("command", []))
            assert "--load-format runai_streamer" in args and "s3://" in args, name


def test_packed_nodes_stream_and_single_pod_nodes_keep_one_copy() -> None:
    packed = make_pool(replicas_per_instance=4, local_nvme_gb=3760)
    single = make_pool(gpus_per_instance=1, replicas_per_instance=1, replicas=3, local_nvme_gb=3760)
    assert pods_per_node(packed) == 4 and pods_per_node(single) == 1
    assert loading_mode(packed, True) == "s3-stream"
    assert loading_mode(single, True) == "nvme"
    multi_node = make_pool(gpus_per_instance=8, tp=8, pp=2, nodes_per_replica=2, replicas_per_instance=1,
                           replicas=2)
    assert pods_per_node(multi_node) == 1


def test_the_cold_start_counts_the_pods_sharing_a_nodes_s3_throughput() -> None:
    one = make_pool(replicas_per_instance=1, gpus_per_instance=1, local_nvme_gb=0)
    four = make_pool(replicas_per_instance=4, local_nvme_gb=0)
    t1 = {t.name: t for t in cold_start(one, "stream").terms}["weights stream"]
    t4 = {t.name: t for t in cold_start(four, "stream").terms}["weights stream"]
    assert t4.seconds == pytest.approx(4 * t1.seconds)
    assert "4 pods share" in t4.how


# the bundled stacks whose pool packs several replicas on a node (llama70b and scaleup-a100 packed 8 until the
# 2026-12-03 refit, after which they plan one TP8 replica per node)
@pytest.mark.parametrize("stack_id", ["scaleout-l4"])
def test_a_packed_bundled_pool_plans_its_load_time_for_the_whole_node(stack_id: str) -> None:
    from sizing.catalog.lookup import load_catalog
    from sizing.perf.memory import GIB

    pool = rendered(stack_id)[0].plan.pools[0]
    pods = pods_per_node(pool)
    assert pods > 1 and loading_mode(pool, False) == "s3-stream"
    s3 = load_catalog().number("weights_load_gbs_s3")
    one_pod = pool.checkpoint_gib / pool.pipeline_parallel * GIB / 1e9 / s3
    assert pool.per_replica.weights_load_s == pytest.approx(pods * one_pod, abs=0.05)  # saved to 0.1 s
