"""Issue 14 item 11, the platform under the GPUs: system nodes sized from the plan and growable by the
Cluster Autoscaler, the EKS control-plane log group with a retention and its cost line, one NAT gateway
per AZ (the plan prices what the network creates)."""

from __future__ import annotations

import math

import pytest

from infra.config import settings
from infra.render import RenderResult
from sizing.catalog.lookup import load_catalog
from sizing.catalog.platform import number
from sizing.planning.system_nodes import _for_pods, requests, size_system_nodes, system_pods
from tests import pulumi_harness as h

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(params=h.BUNDLED_STACKS)
def bundled(request: pytest.FixtureRequest) -> RenderResult:
    return h.bundled(request.param)


def test_router_row_equals_the_router_the_cluster_runs() -> None:
    r, row = settings.policy().router, system_pods()["router"]
    assert row.replicas == r.replicas and row.cpu_m == int(float(r.cpu_request) * 1000)
    assert row.memory_mib == int(r.memory_request.removesuffix("Gi")) * 1024


def test_system_node_group_is_sized_from_the_plan_and_can_grow(bundled: RenderResult) -> None:
    sysn = size_system_nodes(load_catalog(), list(bundled.plan.pools), "m6i.xlarge", bundled.plan.region)
    ng = next(r for r in bundled.of_type(h.NODE_GROUP) if r.inputs["labels"].get("llmcap.io/role") == "system")
    sc = ng.inputs["scalingConfig"]
    assert (sc["minSize"], sc["desiredSize"], sc["maxSize"]) == (sysn.min_size, sysn.desired, sysn.max_size)
    assert sc["maxSize"] > sc["desiredSize"] >= number("system_node_count")
    # the requests fit on the desired nodes: (4 vCPU, 16 GiB) less what the kubelet and DaemonSets keep
    cpu, mem = requests(load_catalog(), list(bundled.plan.pools), sysn.desired)
    cpu_each, mem_each = _for_pods(load_catalog(), 4, 16)
    assert cpu_each < 4000 and mem_each < 16 * 1024
    assert cpu <= sysn.desired * cpu_each
    assert mem <= sysn.desired * mem_each
    lt = next(r for r in bundled.of_type(h.LAUNCH_TEMPLATE) if r.id == ng.inputs["launchTemplate"]["id"])
    root = lt.inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"]
    assert root >= system_pods()["router"].image_gib + number("system_root_volume_margin_gib"), ng.name
    # the plan's system-node cost line prices the same count
    line = next(x for x in bundled.plan.cost_lines if x.name.startswith("System nodes"))
    assert line.quantity == sysn.desired


def test_more_gpu_nodes_need_more_prometheus_and_more_system_nodes() -> None:
    from tests.plan_factory import make_pool

    small = size_system_nodes(load_catalog(), [make_pool(instances_max=2)], "m6i.xlarge", "us-east-1")
    big = size_system_nodes(load_catalog(), [make_pool(instances_max=120)], "m6i.xlarge", "us-east-1")
    assert big.desired > small.desired and big.memory_mib_requested > small.memory_mib_requested
    per = system_pods()["prometheus_per_node"]
    assert big.memory_mib_requested - small.memory_mib_requested >= per.memory_mib * 118


def test_prometheus_requests_what_the_system_nodes_were_sized_for(bundled: RenderResult) -> None:
    from infra.kubernetes.components.kubernetes_app import prometheus_requests

    sysn = size_system_nodes(load_catalog(), list(bundled.plan.pools), "m6i.xlarge", bundled.plan.region)
    rel = next(r for r in bundled.of_type("kubernetes:helm.sh/v3:Release") if r.name == "kube-prometheus-stack")
    got = rel.inputs["values"]["prometheus"]["prometheusSpec"]["resources"]["requests"]
    assert got == prometheus_requests(bundled.plan, sysn.desired)


def test_control_plane_log_group_has_a_retention_and_a_cost_line(bundled: RenderResult) -> None:
    cluster = bundled.of_type(h.CLUSTER)[0]
    (lg,) = bundled.of_type("aws:cloudwatch/logGroup:LogGroup")
    assert lg.inputs["name"] == f"/aws/eks/{cluster.inputs['name']}/cluster"
    assert lg.inputs["retentionInDays"] == int(number("control_plane_log_retention_days"))
    line = next(x for x in bundled.plan.cost_lines if x.name.startswith("EKS control-plane logs"))
    assert line.usd_per_month and line.usd_per_month > 0 and line.unit == "GB"
    nodes = sum(p.instances_desired for p in bundled.plan.pools) + \
        size_system_nodes(load_catalog(), list(bundled.plan.pools), "m6i.xlarge", bundled.plan.region).desired
    expected_gb = number("control_plane_log_gb_base") + number("control_plane_log_gb_per_node") * nodes
    assert math.isclose(line.quantity, round(expected_gb, 1))


def test_one_nat_gateway_per_az_and_the_plan_prices_them(bundled: RenderResult) -> None:
    subnets = {s.id: s for s in bundled.of_type(h.SUBNET)}
    nats = bundled.of_type("aws:ec2/natGateway:NatGateway")
    private_azs = {s.inputs["availabilityZoneId"] for s in subnets.values() if "private" in s.name}
    nat_azs = {subnets[n.inputs["subnetId"]].inputs["availabilityZoneId"] for n in nats}
    assert nat_azs == private_azs, bundled.stack.name
    # every private subnet's default route uses the NAT gateway in its own AZ
    nat_by_id = {n.id: subnets[n.inputs["subnetId"]].inputs["availabilityZoneId"] for n in nats}
    routes = [r for r in bundled.of_type("aws:ec2/route:Route") if r.inputs.get("natGatewayId")]
    for r in routes:
        az = r.name.removeprefix(f"llmcap-{bundled.stack.name}-private-default-")
        assert nat_by_id[r.inputs["natGatewayId"]] == az, r.name
    line = next(x for x in bundled.plan.cost_lines if x.name == "NAT gateways")
    assert line.quantity == len(nats), bundled.stack.name
