"""Karpenter as the GPU node provisioner (issue 28 item 2, `llmcap:deployment.provisioner: karpenter`):
the EC2NodeClass and NodePools (checked against the pinned release's CRD schemas), the controller's Helm
release, Pod Identity role and node role, the managed node groups and Cluster Autoscaler it replaces, and
the fit rules that cover Karpenter pools."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from infra.aws.nodegroups import GPU_RESOURCE, gpu_labels
from infra.config.names import DO_NOT_DISRUPT
from infra.config.platform import load_platform
from infra.config.settings import chart
from infra.fit.check import FitContext, check_deployable
from infra.karpenter import nodes as karpenter
from sizing.deployment import DeploymentOptions
from sizing.planning.planner import plan_stack
from sizing.stack import Stack, load_stack
from tests import pulumi_harness as h
from tests.k8s_support import ROOT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
SCHEMAS = json.loads((Path(__file__).parent / "data" / "karpenter_crd_schemas.json").read_text(encoding="utf-8"))
CR = "kubernetes:karpenter.sh/v1:NodePool"
NC = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
BLOCK = "cr-0a1b2c3d4e5f60718"


def _strict(schema: Any) -> Any:
    """The schema as the API server's strict field validation applies it (`kubectl apply --validate=strict`):
    an object with declared properties and no additionalProperties of its own admits no other field."""
    if isinstance(schema, list):
        return [_strict(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    open_ended = "additionalProperties" in out or out.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in out and not open_ended:
        out["additionalProperties"] = False
    return out


def _with_provisioner(stack: Stack, provisioner: str) -> Stack:
    return dataclasses.replace(stack, deployment=stack.deployment.model_copy(update={"provisioner": provisioner}))


def _objects(res: Any, type_token: str) -> dict[str, dict[str, Any]]:
    return {r.inputs["metadata"]["name"]: r.inputs for r in res.of_type(type_token)}


def test_provisioner_defaults_to_managed_node_groups_and_refuses_other_values() -> None:
    assert DeploymentOptions().provisioner == "managed-node-groups"
    with pytest.raises(ValidationError, match="provisioner"):
        DeploymentOptions(provisioner="fargate")  # type: ignore[arg-type]


def test_karpenter_stack_renders_nodeclasses_and_nodepools_with_capacity_type_and_reservation() -> None:
    res = h.bundled("llama70b-karpenter")
    cb, rest = res.plan.pools
    pools, classes = _objects(res, CR), _objects(res, NC)
    assert set(pools) == set(classes) == {karpenter.nodeclass_name(cb), karpenter.nodeclass_name(rest)}
    req = {r["key"]: r["values"] for r in pools[karpenter.nodeclass_name(cb)]["spec"]["template"]["spec"]
           ["requirements"]}
    assert req == {"node.kubernetes.io/instance-type": ["p5.48xlarge"], "karpenter.sh/capacity-type": ["reserved"],
                   "topology.k8s.aws/zone-id": ["use1-az6"]}
    other = {r["key"]: r["values"] for r in pools[karpenter.nodeclass_name(rest)]["spec"]["template"]["spec"]
             ["requirements"]}
    assert other["karpenter.sh/capacity-type"] == ["on-demand"]
    assert classes[karpenter.nodeclass_name(cb)]["spec"]["capacityReservationSelectorTerms"] == [{"id": BLOCK}]
    assert "capacityReservationSelectorTerms" not in classes[karpenter.nodeclass_name(rest)]["spec"]
    spec = pools[karpenter.nodeclass_name(cb)]["spec"]
    assert spec["limits"] == {GPU_RESOURCE: "16", "cpu": "384"}  # 2 × p5.48xlarge (8 GPUs, 192 vCPUs)
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert spec["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert spec["template"]["metadata"]["labels"] == gpu_labels(cb)
    nc = classes[karpenter.nodeclass_name(cb)]["spec"]
    assert nc["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert nc["metadataOptions"]["httpTokens"] == "required" and nc["metadataOptions"]["httpPutResponseHopLimit"] == 1
    ebs = nc["blockDeviceMappings"][0]["ebs"]
    assert ebs["encrypted"] is True and ebs["volumeType"] == "gp3" and ebs["volumeSize"] == f"{cb.root_volume_gib}Gi"


def test_karpenter_pools_get_no_managed_node_group_and_no_cluster_autoscaler() -> None:
    res = h.bundled("llama70b-karpenter")
    assert [r.name for r in res.of_type(h.NODE_GROUP)] == [f"{h.gpu_node_group_name(res, 'system')}"]
    releases = {r.inputs["name"] for r in res.of_type("kubernetes:helm.sh/v3:Release")}
    assert "karpenter" in releases and "cluster-autoscaler" not in releases
    assert not [r for r in res.of_type("aws:iam/role:Role") if r.name.endswith("-cluster-autoscaler")]
    assert "cluster-autoscaler" in {r.inputs["name"] for r in h.bundled("llama70b-block")
                                    .of_type("kubernetes:helm.sh/v3:Release")}


def test_controller_release_identity_and_node_role() -> None:
    res = h.bundled("llama70b-karpenter")
    c = chart("karpenter")
    (rel,) = [r for r in res.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "karpenter"]
    assert (rel.inputs["chart"], rel.inputs["version"]) == ("oci://public.ecr.aws/karpenter/karpenter", c.version)
    values = rel.inputs["values"]
    assert values["settings"]["featureGates"]["reservedCapacity"] is True
    assert values["nodeSelector"] == {"llmcap.io/role": "system"}
    (assoc,) = [r for r in res.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                if r.inputs["serviceAccount"] == karpenter.KARPENTER_SERVICE_ACCOUNT]
    assert assoc.inputs["namespace"] == c.namespace
    doc = h.policy(h.one(res, "aws:iam/rolePolicy:RolePolicy", f"{h.gpu_node_group_name(res, 'karpenter')}")
                   .inputs["policy"])
    by_sid = {s["Sid"]: s for s in doc["Statement"]}
    node_role = h.one(res, "aws:iam/role:Role", f"{h.gpu_node_group_name(res, 'karpenter-node')}")
    assert by_sid["AllowPassingInstanceRole"]["Resource"] == node_role.outputs["arn"]
    assert "${" not in json.dumps(doc) and "llmcap-llama70b-karpenter-eks" in json.dumps(doc)
    (entry,) = [r for r in res.of_type("aws:eks/accessEntry:AccessEntry") if r.inputs.get("type") == "EC2_LINUX"]
    assert entry.inputs["principalArn"] == node_role.outputs["arn"]
    classes = _objects(res, NC)
    assert {c["spec"]["role"] for c in classes.values()} == {node_role.outputs["name"]}
    tagged = {r.inputs["resourceId"] for r in res.of_type("aws:ec2/tag:Tag")
              if r.inputs["key"] == karpenter.DISCOVERY_TAG}
    subnets = {r.id for r in res.of_type("aws:ec2/subnet:Subnet") if r.name.startswith(
        f"{h.gpu_node_group_name(res, 'private')}")}
    assert subnets and subnets < tagged and len(tagged) == len(subnets) + 1  # and the cluster security group


def test_serving_pods_are_never_disrupted_by_karpenter_only_with_karpenter() -> None:
    def annotations(name: str) -> list[dict[str, str]]:
        res = h.bundled(name)
        return [r.inputs["spec"]["template"]["metadata"].get("annotations", {})
                for r in res.of_type("kubernetes:apps/v1:Deployment") if r.name.startswith("deployment-vllm-")]
    assert annotations("llama70b-karpenter") == [DO_NOT_DISRUPT] * 2
    assert all(DO_NOT_DISRUPT.keys().isdisjoint(a) for a in annotations("llama70b-block"))


@pytest.mark.parametrize("kind", ["NodePool", "EC2NodeClass"])
def test_rendered_objects_match_the_pinned_crd_schemas(kind: str) -> None:
    schema = _strict(SCHEMAS[kind]["openAPIV3Schema"])
    objs = _objects(h.bundled("llama70b-karpenter"), CR if kind == "NodePool" else NC)
    for obj in objs.values():
        jsonschema.validate(obj, schema)
    # and the schema is strict enough to catch a misspelt field
    bad = dict(next(iter(objs.values())))
    bad["spec"] = {**bad["spec"], "limit": {}} if kind == "NodePool" else {**bad["spec"], "httpTokens": "required"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    if kind == "NodePool":  # an enum the CRD restricts
        wrong = {**bad["spec"], "disruption": {"consolidationPolicy": "WhenIdle", "consolidateAfter": "1m"}}
        with pytest.raises(jsonschema.ValidationError, match="WhenIdle"):
            jsonschema.validate({**bad, "spec": wrong}, schema)


def test_vendored_schemas_name_their_release() -> None:
    assert "v1.14.1" in SCHEMAS["_source"] and chart("karpenter").version == "1.14.1"
    assert {SCHEMAS["NodePool"]["group"], SCHEMAS["EC2NodeClass"]["group"]} == {"karpenter.sh", "karpenter.k8s.aws"}


def test_karpenter_labels_equal_the_node_groups() -> None:
    pool = h.bundled("llama70b-karpenter").plan.pools[0]
    assert karpenter.gpu_labels(pool) == gpu_labels(pool)


def test_karpenter_stack_passes_the_fit_check() -> None:
    res = h.bundled("llama70b-karpenter")
    report = check_deployable(FitContext(stack=res.stack, plan=res.plan, catalog=h.catalog()))
    assert report.ok, report.problems


def test_nodepool_limits_must_admit_replicas_max() -> None:
    res = h.bundled("llama70b-karpenter")
    cb, rest = res.plan.pools
    # a hand-edited plan whose replicas_max outgrows instances_max
    plan = res.plan.model_copy(update={"pools": [cb, rest.model_copy(update={"replicas_max": rest.instances_max + 2})]})
    problems = check_deployable(FitContext(stack=res.stack, plan=plan, catalog=h.catalog())).problems
    (p,) = [p for p in problems if p.rule == "karpenter-limits"]
    gpus = rest.gpus_per_instance
    assert p.subject == rest.name and f"needs {rest.instances_max + 2} nodes" in p.message, p.message
    assert f"nvidia.com/gpu {rest.instances_max * gpus} < {(rest.instances_max + 2) * gpus}" in p.message, p.message
    # the same plan on managed node groups has no NodePool to limit
    mng = _with_provisioner(res.stack, "managed-node-groups")
    assert not [p for p in check_deployable(FitContext(stack=mng, plan=plan, catalog=h.catalog())).problems
                if p.rule == "karpenter-limits"]


def test_multi_node_pool_on_karpenter_passes_on_efa_and_is_refused_without() -> None:
    """Karpenter v1.14.1 attaches EFA interfaces when the pod requests vpc.amazonaws.com/efa and places the node in
    the EC2NodeClass's placementGroupSelector (tests/test_karpenter_efa.py); a pool the plan put on no EFA is
    refused."""
    stack = _with_provisioner(load_stack(ROOT / "stacks" / "Pulumi.llama405b.yaml"), "karpenter")
    plan = plan_stack(stack, h.catalog())
    assert check_deployable(FitContext(stack=stack, plan=plan, catalog=h.catalog(), api_key="k")).ok
    tcp = plan.model_copy(update={"pools": [p.model_copy(update={"inter_node_fabric": "ena"}) for p in plan.pools]})
    problems = check_deployable(FitContext(stack=stack, plan=tcp, catalog=h.catalog())).problems
    assert [p.rule for p in problems if p.rule.startswith("karpenter")] == ["karpenter-multi-node-without-efa"]


def test_controller_policy_is_the_vendored_documented_one() -> None:
    doc = json.loads(karpenter.POLICY_FILE.read_text(encoding="utf-8"))
    assert "cloudformation.yaml" in doc["_source"] and doc["_as_of"]
    filled = json.loads(karpenter.controller_policy(partition="aws", region="us-east-1", account_id="123456789012",
                                                    cluster_name="c", node_role_arn="arn:aws:iam::1:role/n"))
    assert len(filled["Statement"]) == len(doc["Statement"])
    scoped = [s for s in filled["Statement"] if s["Sid"] == "AllowScopedEC2InstanceAccessActions"]
    assert scoped and all("us-east-1" in r for r in scoped[0]["Resource"])


def test_nodepool_builder_refuses_an_unknown_purchase() -> None:
    pool = h.bundled("llama70b-karpenter").plan.pools[0].model_copy(update={"purchase": "barter"})
    with pytest.raises(ValueError, match="barter"):
        karpenter.node_pool(pool, zone_ids=["use1-az6"], vcpus_per_instance=192)
    assert karpenter.ec2_node_class(pool.model_copy(update={"capacity_reservation_id": None}), cluster_name="c",
                                    node_role_name="r", platform=load_platform())["spec"].get(
        "capacityReservationSelectorTerms") is None


def test_nodepools_are_priced_as_the_plan_prices_the_pools(tmp_path: Path) -> None:
    from infra.render import resources_document
    from sizing.cost.resources import karpenter_node_pool as priced
    from sizing.cost.resources import load_resources, price_resources
    from sizing.cost.resources.base import PricingContext

    assert (karpenter.DESIRED_ANNOTATION, karpenter.PURCHASE_ANNOTATION) == (priced.DESIRED_ANNOTATION,
                                                                             priced.PURCHASE_ANNOTATION)
    res = h.bundled("llama70b-karpenter")
    f = tmp_path / "resources.json"
    f.write_text(json.dumps(resources_document(res)), encoding="utf-8")
    lines = {ln.name: ln for ln in price_resources(load_resources(f), PricingContext(h.catalog(), res.plan.region))}
    cb, rest = res.plan.pools
    block = lines["GPU instances (capacity-block, p5.48xlarge)"]
    assert block.quantity == cb.instances_desired and block.unit == "instances (max 2)" and block.usd_per_month
    assert lines["GPU instances (on-demand, p5.48xlarge)"].unit == f"instances (max {rest.instances_max})"
    assert lines["Node root volumes (EBS gp3)"].usd_per_month is not None


def test_your_own_vpc_subnets_are_tagged_for_discovery() -> None:
    from tests.plan_factory import make_plan
    from tests.test_infra_aws import factory_stack

    subnets = ["subnet-0aaa1111bbbb2222c", "subnet-0ddd3333eeee4444f"]
    stack = factory_stack(deployment={"provisioner": "karpenter", "vpc_id": "vpc-0123456789abcdef0",
                                      "private_subnet_ids": subnets})
    res = h.render(stack, make_plan(stack="t"))
    tagged = {r.inputs["resourceId"] for r in res.of_type("aws:ec2/tag:Tag")
              if r.inputs["key"] == karpenter.DISCOVERY_TAG}
    assert set(subnets) < tagged and len(tagged) == 3
    (pool,) = res.plan.pools
    (np,) = res.of_type(CR)
    zones = [r for r in np.inputs["spec"]["template"]["spec"]["requirements"] if r["key"] == karpenter.ZONE_ID_KEY]
    assert zones[0]["values"] == sorted(h.catalog().offered_azs(pool.instance_type, res.plan.region))
