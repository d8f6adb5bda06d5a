"""Issue 32: NVIDIA's DCGM exporter (pinned chart) runs on every GPU node with the requests the node model
subtracts, Prometheus scrapes it with the GPU's pod labels, and the dashboard shows each pool's GPU
utilisation and memory beside the plan's weights + KV cache per GPU."""

from __future__ import annotations

import json

import pytest

from infra.config import settings
from infra.config.names import GPU_TAINT_KEY
from infra.kubernetes.k8s_common import serving_name
from sizing.planning.allocatable import daemonset_request
from tests.k8s_support import STACK_IDS, objects, rendered


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_dcgm_exporter_runs_on_gpu_nodes_and_feeds_the_dashboard(stack_id: str) -> None:
    result, _ = rendered(stack_id)
    chart = settings.chart("dcgm_exporter")
    rel = next(r for r in result.resources if r.type == "kubernetes:helm.sh/v3:Release" and r.name == chart.name)
    assert rel.inputs["version"] == chart.version and rel.inputs["chart"] == "dcgm-exporter"
    values = rel.inputs["values"]
    d = daemonset_request("dcgm-exporter")
    assert values["resources"]["requests"] == {"cpu": f"{d.cpu_millicores}m", "memory": f"{d.memory_mib}Mi"}
    assert {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]
    assert values["serviceMonitor"]["enabled"] is True and values["serviceMonitor"]["honorLabels"] is True
    cm = next(o for o in objects(stack_id) if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "llmcap-dashboard")
    dash = json.loads(next(iter(cm["data"].values())))
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    for pool in result.plan.pools:
        sel = f'pod=~"{serving_name(pool.name)}-.*"'
        assert any("DCGM_FI_DEV_GPU_UTIL" in e and sel in e for e in exprs), stack_id
        assert any("DCGM_FI_DEV_FB_USED" in e and sel in e for e in exprs), stack_id
        planned = pool.per_replica.weights_gib_per_gpu + pool.per_replica.kv_cache_gib_per_gpu
        assert f"vector({planned:g})" in exprs, stack_id
