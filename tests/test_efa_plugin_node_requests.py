"""Issue 28 (cap4 item 3): the EFA device plugin's DaemonSet requests on the node. sizing/data/node_daemonsets.csv
holds its row (eks-charts aws-efa-k8s-device-plugin v0.5.30 values.yaml resources.requests: cpu 10m, memory
20Mi), marked to run only on EFA nodes; the node model subtracts it only there, the chart values llmcap renders
carry the same requests, and the fit check's allocatable for a pool on EFA counts it."""

from __future__ import annotations

import pytest

from infra.fit.check import FitContext, check_deployable
from infra.fit.rules import pool_views
from infra.kubernetes import efa_plugin
from sizing.catalog.lookup import load_catalog
from sizing.planning.allocatable import daemonset_request, node_allocatable, per_replica_requests
from tests import pulumi_harness as h
from tests.k8s_support import rendered

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CAT = load_catalog()
NAME = "aws-efa-k8s-device-plugin"
RELEASE = "kubernetes:helm.sh/v3:Release"


def test_the_plugin_row_says_the_chart_requests_and_runs_only_on_efa_nodes() -> None:
    d = daemonset_request(NAME)
    assert (d.namespace, d.cpu_millicores, d.memory_mib, d.only_on_efa_nodes) == ("kube-system", 10, 20, True)
    assert "0.5.30" in d.source and "values.yaml" in d.source


def test_the_node_model_counts_it_only_on_efa_nodes() -> None:
    inst = CAT.instances["p5.48xlarge"]
    plain, efa = node_allocatable(CAT, inst), node_allocatable(CAT, inst, efa=True)
    assert efa.daemonset_cpu_millicores - plain.daemonset_cpu_millicores == 10
    assert efa.daemonset_memory_mib - plain.daemonset_memory_mib == 20
    assert efa.for_pods_cpu_millicores == plain.for_pods_cpu_millicores - 10


def test_rendered_chart_values_request_what_the_model_subtracts() -> None:
    res = h.bundled("llama405b")
    (rel,) = [r for r in res.resources if r.type == RELEASE and r.name == "aws-efa-device-plugin"]
    d = daemonset_request(NAME)
    assert rel.inputs["values"]["resources"]["requests"] == {"cpu": f"{d.cpu_millicores}m",
                                                             "memory": f"{d.memory_mib}Mi"}


def test_llama405b_plans_and_fits_with_the_plugin_on_its_nodes() -> None:
    result, _ = rendered("llama405b")
    (pool,) = result.plan.pools
    inst = CAT.instances[pool.instance_type]
    assert (pool.cpu_millicores_per_replica, pool.memory_mib_per_replica) == \
        per_replica_requests(CAT, inst, 1, efa=True)
    fit = FitContext(stack=result.stack, plan=result.plan, catalog=h.catalog())
    (view,) = pool_views(fit)
    assert view.node == node_allocatable(CAT, inst, efa=True)
    assert pool.instance_type in efa_plugin.plugin_instance_types(result.plan)
    assert check_deployable(fit).ok


def test_a_node_without_efa_does_not_count_it() -> None:
    result, _ = rendered("dev")
    fit = FitContext(stack=result.stack, plan=result.plan, catalog=h.catalog())
    for v in pool_views(fit):
        assert v.node == node_allocatable(CAT, CAT.instances[v.pool.instance_type])
