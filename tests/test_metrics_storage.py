"""Issue 32: Prometheus keeps its blocks on an encrypted gp3 PersistentVolume of the EBS CSI driver (the
aws-ebs-csi-driver add-on with its Pod Identity role), sized from retention × series by Prometheus's own
capacity formula (sizing/planning/metrics_storage.py), and fills at most the recommended share of it."""

from __future__ import annotations

import json

import pytest

from infra.config import settings
from infra.kubernetes.observability import duration_s
from sizing.catalog.platform import number
from sizing.planning.metrics_storage import GIB, prometheus_volume
from tests import pulumi_harness as h
from tests.k8s_support import STACK_IDS, objects, rendered
from tests.plan_factory import make_plan, make_pool


def test_the_volume_follows_prometheus_capacity_formula() -> None:
    plan = make_plan([make_pool(instances_max=40)])
    v = prometheus_volume(plan, 3, 15 * 86400, 15)
    series = number("prometheus_series_base") + number("prometheus_series_per_node") * 43
    assert v.series == series
    # needed_disk_space = retention_time_seconds * ingested_samples_per_second * bytes_per_sample
    assert v.blocks_gib == pytest.approx(15 * 86400 * series / 15 * number("prometheus_bytes_per_sample") / GIB)
    assert v.volume_gib * number("prometheus_retention_size_fraction") >= v.blocks_gib
    assert v.retention_size_gib <= v.volume_gib * 0.85
    # twice the retention, twice the blocks; a tiny cluster gets the minimum
    assert prometheus_volume(plan, 3, 30 * 86400, 15).blocks_gib == pytest.approx(2 * v.blocks_gib)
    small = prometheus_volume(make_plan([make_pool(instances_max=1)]), 1, 3600, 60)
    assert small.volume_gib == number("prometheus_volume_min_gib")


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_prometheus_keeps_its_blocks_on_a_gp3_volume(stack_id: str) -> None:
    result, _ = rendered(stack_id)
    release = next(r for r in result.resources if r.type == "kubernetes:helm.sh/v3:Release"
                   and r.name == "kube-prometheus-stack")
    spec = release.inputs["values"]["prometheus"]["prometheusSpec"]
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    o = settings.policy().observability
    assert claim["storageClassName"] == o.storage_class
    system_max = result.plan.platform.system_nodes.max_size
    v = prometheus_volume(result.plan, system_max, duration_s(o.retention), duration_s(o.scrape_interval))
    assert claim["resources"]["requests"]["storage"] == f"{v.volume_gib}Gi", stack_id
    assert spec["retentionSize"] == f"{v.retention_size_gib}GB"
    sc = next(x for x in objects(stack_id) if x["kind"] == "StorageClass")
    assert sc["metadata"]["name"] == o.storage_class and sc["provisioner"] == "ebs.csi.aws.com"
    assert sc["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer"


def test_the_cluster_installs_the_ebs_csi_driver_with_its_pod_identity_role() -> None:
    result = h.bundled("dev")
    addon = next(a for a in result.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-ebs-csi-driver")
    (assoc,) = addon.inputs["podIdentityAssociations"]
    assert assoc["serviceAccount"] == "ebs-csi-controller-sa"
    role = next(r for r in result.of_type("aws:iam/role:Role") if r.name.endswith("-ebs-csi"))
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert "pods.eks.amazonaws.com" in json.dumps(trust)
    attached = [a.inputs["policyArn"] for a in result.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                if a.name.startswith(role.name)]
    assert attached == ["arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"]
