"""The platform rules of the deployability check (infra/fit/platform_rules.py): the EKS API reachable
from where `pulumi up` runs (issue 14 item 6), every image from the pull-through cache or the user's
registry and pinned (item 9), every pinned component supporting the cluster's Kubernetes minor (item 10)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from infra.fit.check import FitContext, check_deployable
from infra.fit.platform_rules import endpoint_unreachable
from sizing.deployment import DeploymentOptions
from sizing.stack import stack_from_config
from tests import pulumi_harness as h
from tests.plan_factory import make_plan

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def stack(deployment: dict | None = None, name: str = "t"):
    cfg = {"aws:region": "us-east-1",
           "llmcap:workload": {"model": "meta-llama/Meta-Llama-3-8B-Instruct", "prompt_tokens": 1024,
                               "output_tokens": 512, "traffic": {"concurrent_users": 100},
                               "slo": {"ttft_p95_ms": 1000, "itl_p95_ms": 25}}}
    if deployment is not None:
        cfg["llmcap:deployment"] = deployment
    return stack_from_config(name, cfg)


def ctx(deployment: dict | None = None, deploying: bool = True) -> FitContext:
    return FitContext(stack=stack(deployment), plan=make_plan(stack="t"), catalog=h.catalog(),
                      extra={"deploying": deploying})


# --- item 6: the EKS API endpoint ---------------------------------------------------------------------

def test_a_private_endpoint_in_a_vpc_created_by_the_same_run_is_refused_with_one_line() -> None:
    problems = list(endpoint_unreachable(ctx()))
    assert len(problems) == 1 and "\n" not in problems[0].message
    p = problems[0]
    assert p.rule == "endpoint-unreachable" and "cluster_endpoint_public_access_cidrs" in p.message
    assert "pulumi config set --path" in p.message and p.source.startswith("https://docs.aws.amazon.com/eks")


def test_the_endpoint_rule_is_part_of_the_check() -> None:
    report = check_deployable(ctx())
    assert any(p.rule == "endpoint-unreachable" for p in report.problems), report.lines()


def test_an_offline_render_does_not_need_to_reach_the_api() -> None:
    assert list(endpoint_unreachable(ctx(deploying=False))) == []


@pytest.mark.parametrize("deployment", [
    {"cluster_endpoint_public_access_cidrs": ["198.51.100.7/32"]},
    {"vpc_id": "vpc-1", "private_subnet_ids": ["subnet-a", "subnet-b"], "cluster_endpoint_private_only": True},
    {"cluster_endpoint_public_access_cidrs": ["0.0.0.0/0"], "cluster_endpoint_allow_open": True},
])
def test_a_reachable_endpoint_passes(deployment: dict) -> None:
    assert list(endpoint_unreachable(ctx(deployment))) == []


def test_private_only_with_a_vpc_this_run_creates_is_refused_even_offline() -> None:
    (p,) = endpoint_unreachable(ctx({"cluster_endpoint_private_only": True}, deploying=False))
    assert "vpc_id" in p.message and "created by this run" in p.message


@pytest.mark.parametrize("bad, message", [
    ({"cluster_endpoint_public_access_cidrs": ["0.0.0.0/0"]}, "cluster_endpoint_allow_open"),
    ({"cluster_endpoint_public_access_cidrs": ["198.51.100.7/32"], "cluster_endpoint_private_only": True},
     "private_only"),
])
def test_open_or_contradictory_endpoint_settings_are_bad_input(bad: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DeploymentOptions(**bad)


def test_cluster_keeps_private_access_and_opens_public_access_only_to_the_given_cidrs() -> None:
    result = h.render(stack({"cluster_endpoint_public_access_cidrs": ["198.51.100.7/32"]}), make_plan(stack="t"))
    vpc = h.one(result, h.CLUSTER, "llmcap-t-eks").inputs["vpcConfig"]
    assert vpc["endpointPrivateAccess"] is True  # nodes reach the API inside the VPC
    assert vpc["endpointPublicAccess"] is True and vpc["publicAccessCidrs"] == ["198.51.100.7/32"]


# --- item 9: image sources ------------------------------------------------------------------------------

def test_docker_hub_images_without_a_credential_or_registry_are_refused_at_deploy_time() -> None:
    from infra.fit.platform_rules import image_source

    (p,) = image_source(ctx())
    assert p.rule == "image-source" and "vllm/vllm-openai" in p.message and "docker_hub_credential_arn" in p.message
    arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:ecr-pullthroughcache/docker-hub-AbCdEf"
    assert list(image_source(ctx({"docker_hub_credential_arn": arn}))) == []
    assert list(image_source(ctx({"image_registry": "registry.example.com/mirror"}))) == []
    assert list(image_source(ctx(deploying=False))) == []


def test_an_unpinned_image_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from infra.config import settings
    from infra.fit.platform_rules import image_source

    real = settings.image
    monkeypatch.setattr(settings, "image", lambda k: settings.Image("lmcache/lmstack-router", "latest")
                        if k == "router" else real(k))
    problems = [p for p in image_source(ctx(deploying=False)) if p.subject == "router"]
    assert problems and "not pinned" in problems[0].message


def test_the_fit_table_reports_images_deployed_by_tag() -> None:
    from infra.config.image_lock import ImagePins

    c = ctx(deploying=False)
    c.extra["image_pins"] = ImagePins(digests={}, unpinned=("router",), lock_file="stacks/images.lock.json")
    for row in check_deployable(c).rows:
        assert str(row["image pins"]).startswith("by tag") and "router" in str(row["image pins"])


# --- issue 32: the pinned Service range ------------------------------------------------------------------

def test_the_cluster_pins_its_service_range_outside_the_vpc() -> None:
    from infra.config.platform import load_platform
    from infra.fit.platform_rules import service_cidr_overlap

    cidr = load_platform().service_ipv4_cidr
    result = h.render(stack(), make_plan(stack="t"))
    net = h.one(result, h.CLUSTER, "llmcap-t-eks").inputs["kubernetesNetworkConfig"]
    assert net["serviceIpv4Cidr"] == cidr
    assert list(service_cidr_overlap(ctx())) == []
    (p,) = service_cidr_overlap(ctx({"vpc_cidr": "172.20.0.0/16"}))
    assert p.rule == "service-cidr-overlap" and p.subject == "llmcap:deployment.vpc_cidr" and cidr in p.message
    # a VPC you bring: its CIDR is not known offline, EKS checks it
    assert list(service_cidr_overlap(ctx({"vpc_id": "vpc-1", "private_subnet_ids": ["subnet-a", "subnet-b"],
                                          "vpc_cidr": "172.20.0.0/16"}))) == []
