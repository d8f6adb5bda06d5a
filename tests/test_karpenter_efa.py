"""Issue 28: EFA on Karpenter nodes. Karpenter v1.14.1 attaches one EFA interface per the instance type's EFA
capacity when the NodeClaim's pods request `vpc.amazonaws.com/efa` (pkg/providers/instance/instance.go
getEFACountForInstance; launchtemplate.go: NetworkCardIndex i, DeviceIndex 0 for card 0 else 1, InterfaceType efa)
and launches into the placement group its EC2NodeClass names (spec.placementGroupSelector {name | id}, which
Karpenter resolves with DescribePlacementGroups and does not create). So a multi-node pool on Karpenter gets a
cluster placement group of its own, named in its EC2NodeClass, one zone in its NodePool, and pods requesting EFA."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest

from infra.config.efa_cards import EFA_RESOURCE
from infra.fit.check import FitContext, check_deployable
from infra.karpenter import nodes as karpenter
from infra.kubernetes.k8s_common import serving_name
from infra.kubernetes.manifests import kubernetes_objects
from infra.render import resources_document
from sizing.planning.planner import plan_stack
from sizing.stack import load_stack
from tests import pulumi_harness as h
from tests.k8s_support import ROOT, find

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
SCHEMAS = json.loads((Path(__file__).parent / "data" / "karpenter_crd_schemas.json").read_text(encoding="utf-8"))
NP = "kubernetes:karpenter.sh/v1:NodePool"
NC = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
PG = "aws:ec2/placementGroup:PlacementGroup"


@pytest.fixture(scope="module")
def rendered():  # type: ignore[no-untyped-def]
    stack = load_stack(ROOT / "stacks" / "Pulumi.llama405b.yaml")
    stack = dataclasses.replace(stack, deployment=stack.deployment.model_copy(update={"provisioner": "karpenter"}))
    plan = plan_stack(stack, h.catalog())
    return h.render(stack, plan)


def test_llama405b_on_karpenter_passes_the_fit_check(rendered) -> None:  # type: ignore[no-untyped-def]
    report = check_deployable(FitContext(stack=rendered.stack, plan=rendered.plan, catalog=h.catalog(), api_key="k"))
    assert report.ok, report.lines()


def test_nodeclass_names_a_cluster_placement_group_and_the_nodepool_one_zone(rendered) -> None:  # type: ignore[no-untyped-def]
    (pool,) = rendered.plan.pools
    (pg,) = rendered.of_type(PG)
    assert pg.inputs["strategy"] == "cluster"
    (nc,) = [r.inputs for r in rendered.of_type(NC)]
    assert nc["spec"]["placementGroupSelector"] == {"name": pg.outputs["name"]}
    (np_,) = [r.inputs for r in rendered.of_type(NP)]
    zones = [r["values"] for r in np_["spec"]["template"]["spec"]["requirements"] if r["key"] == karpenter.ZONE_ID_KEY]
    assert len(zones) == 1 and len(zones[0]) == 1  # a cluster placement group is one AZ
    for obj, kind in ((nc, "EC2NodeClass"), (np_, "NodePool")):
        jsonschema.validate(obj, SCHEMAS[kind]["openAPIV3Schema"])
    lws = find(kubernetes_objects(resources_document(rendered)), "LeaderWorkerSet", serving_name(pool.name))
    (c,) = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
    assert c["resources"]["limits"][EFA_RESOURCE] == "32"  # what makes Karpenter attach the interfaces


def test_single_node_karpenter_pools_get_no_placement_group() -> None:
    res = h.bundled("llama70b-karpenter")
    assert not res.of_type(PG)
    assert all("placementGroupSelector" not in r.inputs["spec"] for r in res.of_type(NC))
