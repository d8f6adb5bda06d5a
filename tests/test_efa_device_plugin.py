"""Issue 28 item 3: EFA that NCCL actually uses. A multi-node pool on EFA gets the EFA device plugin (eks-charts
aws-efa-k8s-device-plugin, its image from EKS's ECR registry of the stack's region) on its nodes only; its pods
request and limit `vpc.amazonaws.com/efa` (one per interface the launch template attaches); the fit check counts
that resource on the node (no plugin: 0 allocatable) and refuses a pod asking for more."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.config.efa_cards import EFA_RESOURCE, efa_interfaces
from infra.config.names import GPU_TAINT_KEY
from infra.fit.check import FitContext, check_deployable
from infra.kubernetes import efa_plugin
from infra.kubernetes.k8s_common import serving_name
from sizing.catalog.lookup import load_catalog
from sizing.errors import SpecError
from sizing.planning.planner import plan_stack
from sizing.stack import load_stack
from tests import pulumi_harness as h
from tests.k8s_support import find, objects, rendered

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ROOT = Path(__file__).resolve().parent.parent
RELEASE = "kubernetes:helm.sh/v3:Release"


def test_registry_is_eks_ecr_account_of_the_region() -> None:
    # EKS user guide add-ons-images: "us-east-1 | 602401143452.dkr.ecr.us-east-1.amazonaws.com",
    # "eu-south-1 | 590381155156.dkr.ecr.eu-south-1.amazonaws.com"
    assert efa_plugin.eks_registry("us-east-1") == "602401143452.dkr.ecr.us-east-1.amazonaws.com"
    assert efa_plugin.eks_registry("eu-south-1") == "590381155156.dkr.ecr.eu-south-1.amazonaws.com"
    with pytest.raises(SpecError, match="aws:region") as e:
        efa_plugin.eks_registry("xx-nowhere-1")
    assert "\n" not in str(e.value)


def test_values_select_only_efa_nodes_and_tolerate_the_gpu_taint() -> None:
    v = efa_plugin.device_plugin_values("eu-west-1", ["p5.48xlarge"])
    assert v["image"] == {"repository": "602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/aws-efa-k8s-device-plugin",
                          "tag": "v0.5.20"}
    assert v["supportedInstanceLabels"] == {"keys": ["node.kubernetes.io/instance-type"], "values": ["p5.48xlarge"]}
    assert {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"} in v["tolerations"]


def test_llama405b_installs_the_plugin_and_its_pods_request_efa() -> None:
    res = h.bundled("llama405b")
    (pool,) = res.plan.pools
    (rel,) = [r for r in res.resources if r.type == RELEASE and r.name == "aws-efa-device-plugin"]
    assert (rel.inputs["chart"], rel.inputs["version"], rel.inputs["namespace"]) == \
        ("aws-efa-k8s-device-plugin", "v0.5.30", "kube-system")
    assert rel.inputs["repositoryOpts"]["repo"] == "https://aws.github.io/eks-charts"
    assert rel.inputs["values"]["supportedInstanceLabels"]["values"] == [pool.instance_type]
    n = efa_interfaces(pool.instance_type)
    assert n == 32
    lws = find(objects("llama405b"), "LeaderWorkerSet", serving_name(pool.name))
    t = lws["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        (c,) = t[role]["spec"]["containers"]
        assert c["resources"]["requests"][EFA_RESOURCE] == c["resources"]["limits"][EFA_RESOURCE] == str(n)


def test_single_node_stacks_get_no_plugin_and_request_no_efa() -> None:
    res, _ = rendered("llama70b-block")
    assert not [r for r in res.resources if r.type == RELEASE and r.name == "aws-efa-device-plugin"]
    for o in objects("llama70b-block"):
        if o["kind"] == "Deployment":
            for c in o["spec"]["template"]["spec"]["containers"]:
                assert EFA_RESOURCE not in (c.get("resources") or {}).get("requests", {})


def _check(monkeypatch: pytest.MonkeyPatch | None = None) -> set[str]:
    stack = load_stack(ROOT / "stacks" / "Pulumi.llama405b.yaml")
    cat = load_catalog()
    return {p.rule for p in check_deployable(FitContext(stack=stack, plan=plan_stack(stack, cat), catalog=cat,
                                                         api_key="k")).problems}


def test_fit_counts_efa_on_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "efa-unallocatable" not in _check()
    # a node the plugin does not select advertises no vpc.amazonaws.com/efa: the pods could never schedule
    monkeypatch.setattr(efa_plugin, "plugin_instance_types", lambda plan: [])
    assert "efa-unallocatable" in _check()


def test_nccl_env_only_where_the_image_carries_aws_ofi_nccl() -> None:
    from infra.kubernetes import nccl_env

    res = h.bundled("llama405b")
    (pool,) = res.plan.pools
    # the pinned vLLM image has no aws-ofi-nccl (sizing/data/nccl_net_plugins.csv): EFA attached, NCCL on sockets
    assert pool.inter_node_fabric == "efa-sockets"
    assert nccl_env.nccl_efa_env(pool) == []
    assert nccl_env.nccl_transport(pool).startswith("sockets: the vllm image has no aws-ofi-nccl")
    lws = find(objects("llama405b"), "LeaderWorkerSet", serving_name(pool.name))
    (c,) = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"]
    assert not {"NCCL_NET", "FI_PROVIDER"} & {e["name"] for e in c["env"]}
    # a plan whose engine image carries the plugin: libfabric pinned to EFA, NCCL forced onto the plugin
    on_efa = pool.model_copy(update={"inter_node_fabric": "efa"})
    env = {e["name"]: e["value"] for e in nccl_env.nccl_efa_env(on_efa)}
    assert env == {"FI_PROVIDER": "efa", "NCCL_NET": "AWS Libfabric"}
    assert nccl_env.nccl_transport(on_efa) == "aws-ofi-nccl (EFA)"
    stack = load_stack(ROOT / "stacks" / "Pulumi.dev.yaml")
    single = plan_stack(stack, load_catalog()).pools[0]
    assert nccl_env.nccl_efa_env(single) == [] and nccl_env.nccl_transport(single) == ""
