"""Cluster add-ons under Pulumi's mock engine, for every bundled stack: the AWS Load Balancer Controller
and the Cluster Autoscaler are pinned Helm releases with the cluster's name, VPC and region, run on the
system nodes with their own Pod Identity roles; the autoscaler's IAM is least privilege and scoped to
this cluster's Auto Scaling groups; GPU node groups carry the discovery and scale-from-zero tags; the
router Service waits for the load balancer controller."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from infra.aws.addons_iam import AUTOSCALER_DESCRIBE_ACTIONS, AUTOSCALER_SCALE_ACTIONS
from infra.aws.nodegroups import gpu_labels
from infra.config import settings
from infra.config.efa_cards import efa_per_pod
from infra.config.names import (
    CLUSTER_AUTOSCALER_NAMESPACE,
    CLUSTER_AUTOSCALER_SERVICE_ACCOUNT,
    GPU_TAINT_KEY,
    LOAD_BALANCER_CONTROLLER_NAMESPACE,
    LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT,
    ROLE_LABEL,
)
from infra.config.platform import load_platform
from infra.kubernetes.components import addons
from infra.render import RenderedResource, RenderResult
from tests import pulumi_harness as h

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

RELEASE = "kubernetes:helm.sh/v3:Release"
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ASG_TAG = "aws:autoscaling/tag:Tag"
VPC = "aws:ec2/vpc:Vpc"
TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
CHARTS = {"aws-load-balancer-controller": "aws_load_balancer_controller", "cluster-autoscaler": "cluster_autoscaler"}


@pytest.fixture(params=h.BUNDLED_STACKS)
def bundled(request: pytest.FixtureRequest) -> RenderResult:
    return h.bundled(request.param)


def _cluster_name(result: RenderResult) -> str:
    (cluster,) = result.of_type(h.CLUSTER)
    return str(cluster.outputs["name"])


def _vpc_id(result: RenderResult) -> str:
    if result.stack.deployment.vpc_id:
        return result.stack.deployment.vpc_id
    (vpc,) = result.of_type(VPC)
    return str(vpc.id)


def _autoscaled(result: RenderResult) -> bool:
    """Managed GPU node groups, so a Cluster Autoscaler; none when Karpenter launches every pool (issue 28)."""
    if result.stack.deployment.provisioner == "karpenter":
        assert not [r for r in result.of_type(RELEASE) if r.inputs["name"] == "cluster-autoscaler"]
        return False
    return True


def _release(result: RenderResult, name: str) -> dict[str, Any]:
    return h.one(result, RELEASE, name).inputs


def _role_policy_of(result: RenderResult, service_account: str, namespace: str) -> tuple[RenderedResource, dict]:
    assoc = h.referring(result, POD_IDENTITY, "serviceAccount", service_account)
    assert len(assoc) == 1, f"{service_account}: {len(assoc)} pod identity associations"
    assert assoc[0].inputs["namespace"] == namespace, assoc[0].name
    assert assoc[0].inputs["clusterName"] == _cluster_name(result), assoc[0].name
    role = next(r for r in result.of_type(ROLE) if r.outputs["arn"] == assoc[0].inputs["roleArn"])
    trust = h.policy(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}, role.name
    inline = h.referring(result, ROLE_POLICY, "role", role.id)
    assert len(inline) == 1, role.name
    return role, h.policy(inline[0].inputs["policy"])


def _actions(statement: dict[str, Any]) -> list[str]:
    a = statement["Action"]
    return a if isinstance(a, list) else [a]


# --- the Helm releases --------------------------------------------------------------------------

def test_both_add_ons_are_pinned_releases_from_the_versions_file(bundled: RenderResult) -> None:
    for name, key in CHARTS.items():
        if name == "cluster-autoscaler" and not _autoscaled(bundled):
            continue
        r = _release(bundled, name)
        c = settings.chart(key)
        assert (r["chart"], r["version"], r["namespace"]) == (c.chart, c.version, c.namespace), name
        assert r["repositoryOpts"]["repo"] == c.repo and c.repo.startswith("https://"), name
        assert re.fullmatch(r"\d+\.\d+\.\d+", r["version"]), f"{name}: {r['version']} is not an exact version"
        # on the untainted CPU system nodes, never on GPU nodes
        assert r["values"]["nodeSelector"] == {ROLE_LABEL: "system"}, name
    system = [n for n in bundled.of_type(h.NODE_GROUP) if not n.inputs.get("taints")]
    assert system and system[0].inputs["labels"][ROLE_LABEL] == "system"


def test_load_balancer_controller_values(bundled: RenderResult) -> None:
    v = _release(bundled, "aws-load-balancer-controller")["values"]
    assert v["clusterName"] == _cluster_name(bundled)
    assert v["vpcId"] == _vpc_id(bundled)
    assert v["region"] == bundled.plan.region == bundled.stack.region
    assert v["serviceAccount"] == {"create": True, "name": LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT}
    assert v["enableServiceMutatorWebhook"] is False


def test_cluster_autoscaler_values(bundled: RenderResult) -> None:
    if not _autoscaled(bundled):
        return
    v = _release(bundled, "cluster-autoscaler")["values"]
    assert v["autoDiscovery"] == {"clusterName": _cluster_name(bundled)}
    assert v["awsRegion"] == bundled.plan.region
    assert v["cloudProvider"] == "aws"
    assert v["rbac"]["serviceAccount"] == {"create": True, "name": CLUSTER_AUTOSCALER_SERVICE_ACCOUNT}


def test_cluster_autoscaler_minor_matches_the_kubernetes_version() -> None:
    doc = yaml.safe_load((settings.DATA_DIR / "versions.yaml").read_text(encoding="utf-8"))
    entry = doc["charts"]["cluster_autoscaler"]
    k8s = load_platform().kubernetes_version
    assert ".".join(str(entry["app_version"]).split(".")[:2]) == k8s, \
        f"cluster-autoscaler {entry['app_version']} on Kubernetes {k8s}: the minors must match"
    for key in CHARTS.values():
        assert doc["charts"][key]["source"] and doc["charts"][key]["as_of"], key


# --- IAM ------------------------------------------------------------------------------------------

def test_load_balancer_controller_has_its_pod_identity(bundled: RenderResult) -> None:
    _, pol = _role_policy_of(bundled, LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT, LOAD_BALANCER_CONTROLLER_NAMESPACE)
    assert any("elasticloadbalancing:CreateLoadBalancer" in _actions(s) for s in pol["Statement"])


def test_cluster_autoscaler_role_is_least_privilege(bundled: RenderResult) -> None:
    if not _autoscaled(bundled):
        return
    role, pol = _role_policy_of(bundled, CLUSTER_AUTOSCALER_SERVICE_ACCOUNT, CLUSTER_AUTOSCALER_NAMESPACE)
    owner = f"aws:ResourceTag/k8s.io/cluster-autoscaler/{_cluster_name(bundled)}"
    seen: set[str] = set()
    for s in pol["Statement"]:
        assert s["Effect"] == "Allow", role.name
        acts = _actions(s)
        seen.update(acts)
        assert not any("*" in a for a in acts), f"{role.name}: wildcard action in {acts}"
        if set(acts) & set(AUTOSCALER_SCALE_ACTIONS):
            # mutating calls only on this cluster's Auto Scaling groups
            assert set(acts) <= set(AUTOSCALER_SCALE_ACTIONS), role.name
            assert s["Condition"]["StringEquals"][owner] == "owned", f"{role.name}: {s.get('Condition')}"
        else:
            assert all(a.split(":")[1].startswith(("Describe", "Get")) for a in acts), acts
    assert seen == set(AUTOSCALER_DESCRIBE_ACTIONS) | set(AUTOSCALER_SCALE_ACTIONS), role.name
    assert {"eks:DescribeNodegroup", "ec2:DescribeLaunchTemplateVersions", "ec2:DescribeInstanceTypes",
            "ec2:DescribeImages", "ec2:GetInstanceTypesFromInstanceRequirements"} <= seen


# --- node-group tags ------------------------------------------------------------------------------

def test_gpu_node_groups_carry_discovery_and_scale_from_zero_tags(bundled: RenderResult) -> None:
    if not _autoscaled(bundled):  # no managed GPU node group (tests/test_karpenter.py)
        assert len(bundled.of_type(h.NODE_GROUP)) == 1 and not bundled.of_type(ASG_TAG)
        return
    cluster = _cluster_name(bundled)
    tags_by_asg: dict[str, dict[str, str]] = {}
    for t in bundled.of_type(ASG_TAG):
        assert t.inputs["tag"]["propagateAtLaunch"] is False, t.name
        tags_by_asg.setdefault(t.inputs["autoscalingGroupName"], {})[t.inputs["tag"]["key"]] = t.inputs["tag"]["value"]
    for pool in bundled.plan.pools:
        ng = h.one(bundled, h.NODE_GROUP, h.gpu_node_group_name(bundled, pool.name))
        expected = {f"{TEMPLATE}/label/{k}": v for k, v in gpu_labels(pool).items()}
        expected[f"{TEMPLATE}/taint/{GPU_TAINT_KEY}"] = "true:NoSchedule"
        expected[f"{TEMPLATE}/resources/nvidia.com/gpu"] = str(pool.gpus_per_instance)
        if efa_per_pod(pool):  # a pool on EFA: the interfaces the plugin advertises, so a pod requesting them fits
            expected[f"{TEMPLATE}/resources/vpc.amazonaws.com/efa"] = str(efa_per_pod(pool))
        tags = ng.inputs["tags"]
        assert tags["k8s.io/cluster-autoscaler/enabled"] == "true", ng.name
        assert tags[f"k8s.io/cluster-autoscaler/{cluster}"] == "owned", ng.name
        assert {k: tags.get(k) for k in expected} == expected, ng.name
        # and on the Auto Scaling group, where the autoscaler reads them
        asg = ng.outputs["resources"][0]["autoscalingGroups"][0]["name"]
        assert tags_by_asg.get(asg) == expected, f"{ng.name}: ASG {asg} tags {tags_by_asg.get(asg)}"
    # the taint the template announces is the one the group applies
    for ng in bundled.of_type(h.NODE_GROUP):
        if ng.inputs.get("taints"):
            assert {"key": GPU_TAINT_KEY, "value": "true", "effect": "NO_SCHEDULE"} in ng.inputs["taints"]


def test_system_node_group_can_be_grown_by_the_autoscaler(bundled: RenderResult) -> None:
    """Issue 14 item 11: the system pods (router, add-ons, Prometheus) may outgrow the planned nodes; the
    Cluster Autoscaler discovers the group by the tags EKS puts on every managed node group's Auto
    Scaling group and grows it up to max. No scale-from-zero template: min is at least two."""
    for ng in bundled.of_type(h.NODE_GROUP):
        if not ng.inputs.get("taints"):
            sc = ng.inputs["scalingConfig"]
            assert 2 <= sc["minSize"] == sc["desiredSize"] < sc["maxSize"], ng.name


# --- ordering -------------------------------------------------------------------------------------

def _recording(monkeypatch: pytest.MonkeyPatch, module: Any, attr: str, log: list) -> None:
    """Replace `module.attr` (a resource class or factory) with one that logs (args, opts) and calls through."""
    real = getattr(module, attr)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        log.append((args, kwargs.get("opts") if "opts" in kwargs else args[-1]))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, attr, wrapped)


def _dep_names(opts: Any) -> set[str]:
    return {d.pulumi_resource_name for d in (opts.depends_on or [])}


def test_router_service_waits_for_the_load_balancer_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    from infra.kubernetes.components import apply
    from sizing.planning.planner import plan_stack
    from sizing.stack import load_stack

    created: list = []
    releases: list = []
    _recording(monkeypatch, apply, "create", created)

    class RecordingRelease(addons.k8s.helm.v3.Release):  # type: ignore[misc,name-defined]
        def __init__(self, resource_name: str, **kwargs: Any) -> None:
            releases.append((resource_name, kwargs["opts"]))
            super().__init__(resource_name, **kwargs)

    monkeypatch.setattr(addons.k8s.helm.v3, "Release", RecordingRelease)
    stack = load_stack(h.ROOT / "stacks" / "Pulumi.dev.yaml")
    h.render(stack, plan_stack(stack, h.catalog()))

    services = [opts for (obj, opts) in created if obj[0]["kind"] == "Service"]
    assert len(services) == 1
    deps = services[0].depends_on or []
    lbc = [d for d in deps if d.pulumi_resource_name == "aws-load-balancer-controller"]
    assert lbc and isinstance(lbc[0], addons.k8s.helm.v3.Release), _dep_names(services[0])
    # the add-ons themselves wait for the system nodes, coredns and their Pod Identity associations
    by_name = {n: o for n, o in releases}
    prefix = h.resource_prefix(stack)
    for name in CHARTS:
        deps_named = _dep_names(by_name[name])
        assert {f"{prefix}-system", f"{prefix}-coredns", f"{prefix}-lb-controller",
                f"{prefix}-cluster-autoscaler"} <= deps_named, f"{name}: {deps_named}"


def test_values_builders_are_pure() -> None:
    v = addons.load_balancer_controller_values("c", "vpc-1", "eu-west-1")
    assert (v["clusterName"], v["vpcId"], v["region"]) == ("c", "vpc-1", "eu-west-1")
    c = addons.cluster_autoscaler_values("c", "eu-west-1")
    assert c["autoDiscovery"]["clusterName"] == "c" and c["awsRegion"] == "eu-west-1"
