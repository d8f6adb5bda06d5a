"""The AWS side of the Pulumi program under Pulumi's mock engine: policy-like checks on every
bundled stack (node groups equal the plan, GPU taint and labels, IMDSv2, the weights bucket,
KMS secrets encryption, subnets where the instance types are offered, nothing open to the
world), variants built from hand-made plans, and `llmcap render` without credentials."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra.config.names import GPU_LABEL, GPU_TAINT_KEY, NAMESPACE, POOL_LABEL, SERVING_SERVICE_ACCOUNT, weights_prefix
from infra.config.platform import load_platform
from infra.render import RenderedResource, RenderResult, resources_document
from sizing.deployment import DeploymentOptions
from sizing.stack import stack_from_config
from tests import pulumi_harness as h
from tests.plan_factory import make_plan, make_pool

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(params=h.BUNDLED_STACKS)
def bundled(request: pytest.FixtureRequest) -> RenderResult:
    return h.bundled(request.param)


def factory_stack(name: str = "t", deployment: dict | None = None, hardware: dict | None = None):
    cfg = {"aws:region": "us-east-1",
           "llmcap:workload": {"model": "meta-llama/Meta-Llama-3-8B-Instruct", "prompt_tokens": 1024,
                               "output_tokens": 512, "traffic": {"concurrent_users": 100},
                               "slo": {"ttft_p95_ms": 1000, "itl_p95_ms": 25}}}
    if deployment is not None:
        cfg["llmcap:deployment"] = deployment
    if hardware is not None:
        cfg["llmcap:hardware"] = hardware
    return stack_from_config(name, cfg)


# --- node groups ----------------------------------------------------------------------------

def test_gpu_node_groups_equal_the_plan(bundled: RenderResult) -> None:
    gpu_groups = [r for r in bundled.of_type(h.NODE_GROUP) if r.inputs.get("taints")]
    assert len(gpu_groups) == len(h.node_group_pools(bundled)), [r.name for r in gpu_groups]
    for pool in h.node_group_pools(bundled):
        ng = h.one(bundled, h.NODE_GROUP, h.gpu_node_group_name(bundled, pool.name))
        i = ng.inputs
        if pool.purchase == "capacity-block":  # the launch template names it (EKS Capacity Block node groups)
            lt = h.one(bundled, "aws:ec2/launchTemplate:LaunchTemplate", f"{ng.name}-lt")
            assert "instanceTypes" not in i and lt.inputs["instanceType"] == pool.instance_type, ng.name
        else:
            assert i["instanceTypes"] == [pool.instance_type], ng.name
        assert i["scalingConfig"] == {"minSize": pool.instances_min, "desiredSize": pool.instances_desired,
                                      "maxSize": pool.instances_max}, ng.name
        assert i["capacityType"] == {"on-demand": "ON_DEMAND", "spot": "SPOT", "capacity-block": "CAPACITY_BLOCK",
                                     "reservation": "ON_DEMAND"}[pool.purchase], ng.name
        assert i["amiType"] == load_platform(bundled.stack.deployment).ami_type_gpu, ng.name
        assert "NVIDIA" in i["amiType"], ng.name


def test_every_gpu_node_group_is_tainted_and_labelled(bundled: RenderResult) -> None:
    for pool in h.node_group_pools(bundled):
        ng = h.one(bundled, h.NODE_GROUP, h.gpu_node_group_name(bundled, pool.name))
        assert {"key": GPU_TAINT_KEY, "value": "true", "effect": "NO_SCHEDULE"} in ng.inputs["taints"], ng.name
        assert ng.inputs["labels"][POOL_LABEL] == pool.name, ng.name
        assert ng.inputs["labels"][GPU_LABEL] == pool.gpu, ng.name
    system = [r for r in bundled.of_type(h.NODE_GROUP) if not r.inputs.get("taints")]
    assert len(system) == 1 and "NVIDIA" not in system[0].inputs["amiType"], [r.name for r in system]


def test_imdsv2_required_on_every_launch_template_and_every_node_group_uses_one(bundled: RenderResult) -> None:
    lts = bundled.of_type(h.LAUNCH_TEMPLATE)
    assert lts
    for lt in lts:
        md = lt.inputs.get("metadataOptions", {})
        assert md.get("httpTokens") == "required", lt.name
        # hop limit 1: a pod (one network hop beyond the node) cannot reach IMDS and the node role;
        # pods get AWS credentials from EKS Pod Identity instead
        assert md.get("httpPutResponseHopLimit") == 1, lt.name
        for bdm in lt.inputs["blockDeviceMappings"]:
            assert bdm["ebs"]["encrypted"] == "true", lt.name
    lt_ids = {lt.id for lt in lts}
    for ng in bundled.of_type(h.NODE_GROUP):
        assert ng.inputs.get("launchTemplate", {}).get("id") in lt_ids, ng.name


def test_gpu_root_volume_holds_image_and_model_cache(bundled: RenderResult) -> None:
    platform = load_platform(bundled.stack.deployment)
    ids = h.by_id(bundled)
    for pool in h.node_group_pools(bundled):
        ng = h.one(bundled, h.NODE_GROUP, h.gpu_node_group_name(bundled, pool.name))
        lt = ids[ng.inputs["launchTemplate"]["id"]]
        size = lt.inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"]
        loaded_gib = pool.per_replica.weights_gib_per_gpu * pool.tensor_parallel * pool.pipeline_parallel
        assert size == pool.root_volume_gib, lt.name
        on_nvme = bundled.stack.deployment.model_cache_on_instance_store and pool.local_nvme_gb > 0
        # with the instance store (RAID0) containerd and emptyDirs live on NVMe; else the root volume
        # holds the image and one whole model copy (issue 14 defect 4)
        need = platform.vllm_image_gib + (0 if on_nvme else max(loaded_gib, pool.checkpoint_gib))
        assert size >= need, lt.name
        has_user_data = bool(lt.inputs.get("userData"))
        assert has_user_data == (pool.local_nvme_gb > 0), f"{lt.name}: NVMe cache iff the instance has NVMe"


# --- storage ----------------------------------------------------------------------------------

def test_weights_bucket_private_encrypted_versioned_tls_only(bundled: RenderResult) -> None:
    buckets = bundled.of_type(h.BUCKET)
    assert len(buckets) == 1
    b = buckets[0]
    pab = h.referring(bundled, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "bucket", b.id)
    assert len(pab) == 1, f"{b.name}: no public access block"
    for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"):
        assert pab[0].inputs[k] is True, f"{pab[0].name}.{k}"
    own = h.referring(bundled, "aws:s3/bucketOwnershipControls:BucketOwnershipControls", "bucket", b.id)
    assert own and own[0].inputs["rule"]["objectOwnership"] == "BucketOwnerEnforced", b.name
    sse = h.referring(bundled, "aws:s3/bucketServerSideEncryptionConfiguration:"
                               "BucketServerSideEncryptionConfiguration", "bucket", b.id)
    assert sse, f"{b.name}: not encrypted"
    algo = sse[0].inputs["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"]
    assert algo in ("AES256", "aws:kms", "aws:kms:dsse"), sse[0].name
    ver = h.referring(bundled, "aws:s3/bucketVersioning:BucketVersioning", "bucket", b.id)
    assert ver and ver[0].inputs["versioningConfiguration"]["status"] == "Enabled", f"{b.name}: not versioned"
    pols = h.referring(bundled, "aws:s3/bucketPolicy:BucketPolicy", "bucket", b.id)
    assert pols, f"{b.name}: no bucket policy"
    stmts = h.policy(pols[0].inputs["policy"])["Statement"]
    deny = [s for s in stmts if s["Effect"] == "Deny"
            and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"]
    assert deny, f"{pols[0].name}: no TLS-only deny"
    assert deny[0]["Principal"] == "*" and deny[0]["Action"] == "s3:*", pols[0].name
    assert len(deny[0]["Resource"]) == 2 and deny[0]["Resource"][1] == deny[0]["Resource"][0] + "/*", pols[0].name
    assert not any(s["Effect"] == "Allow" for s in stmts), f"{pols[0].name}: grants access"


def test_serving_pods_get_read_only_access_to_the_model_prefix(bundled: RenderResult) -> None:
    assoc = h.referring(bundled, "aws:eks/podIdentityAssociation:PodIdentityAssociation", "serviceAccount",
                        SERVING_SERVICE_ACCOUNT)
    assert len(assoc) == 1 and assoc[0].inputs["namespace"] == NAMESPACE
    role = next(r for r in bundled.of_type("aws:iam/role:Role") if r.outputs["arn"] == assoc[0].inputs["roleArn"])
    trust = h.policy(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}, role.name
    assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:TagSession"], role.name
    inline = h.referring(bundled, "aws:iam/rolePolicy:RolePolicy", "role", role.id)
    assert len(inline) == 1, role.name
    prefix = weights_prefix(bundled.plan.pools[0].vllm.model)
    actions = set()
    for s in h.policy(inline[0].inputs["policy"])["Statement"]:
        acts = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        actions.update(acts)
        if "s3:GetObject" in acts:
            assert s["Resource"].endswith(f"/{prefix}*"), inline[0].name
    assert actions == {"s3:GetObject", "s3:ListBucket"}, f"{inline[0].name}: {actions}"


# --- cluster ----------------------------------------------------------------------------------

def test_cluster_encrypts_secrets_with_a_rotating_kms_key_and_is_private(bundled: RenderResult) -> None:
    clusters = bundled.of_type(h.CLUSTER)
    assert len(clusters) == 1
    c = clusters[0].inputs
    assert c["encryptionConfig"]["resources"] == ["secrets"], clusters[0].name
    key = next(k for k in bundled.of_type(h.KMS_KEY) if k.outputs["arn"] == c["encryptionConfig"]["provider"]["keyArn"])
    assert key.inputs["enableKeyRotation"] is True, key.name
    assert c["accessConfig"]["authenticationMode"] == "API", clusters[0].name
    assert c["version"] == load_platform(bundled.stack.deployment).kubernetes_version
    vpc = c["vpcConfig"]
    assert vpc["endpointPrivateAccess"] is True, clusters[0].name
    assert vpc["endpointPublicAccess"] is bool(bundled.stack.deployment.cluster_endpoint_public_access_cidrs)
    addons = {a.inputs["addonName"] for a in bundled.of_type("aws:eks/addon:Addon")}
    assert addons == {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent", "aws-ebs-csi-driver"}


def test_subnets_only_in_az_ids_that_offer_the_instance_types(bundled: RenderResult) -> None:
    cat = h.catalog()
    region_azs = {az for (_, r), azs in cat.offerings.items() if r == bundled.plan.region for az in azs}
    subnets = {s.id: s for s in bundled.of_type(h.SUBNET)}
    private_azs = {s.inputs["availabilityZoneId"] for s in subnets.values() if "private" in s.name}
    assert len(private_azs) >= 2, "EKS needs subnets in two AZs"
    for s in subnets.values():
        assert s.inputs["availabilityZoneId"] in region_azs, s.name
        assert "availabilityZone" not in s.inputs, f"{s.name}: use AZ IDs, not account-specific AZ names"
    for pool in h.node_group_pools(bundled):
        ng = h.one(bundled, h.NODE_GROUP, h.gpu_node_group_name(bundled, pool.name))
        offered = set(cat.offered_azs(pool.instance_type, bundled.plan.region))
        assert ng.inputs["subnetIds"], ng.name
        for sid in ng.inputs["subnetIds"]:
            assert subnets[sid].inputs["availabilityZoneId"] in offered, \
                f"{ng.name}: subnet {subnets[sid].name} is in an AZ without {pool.instance_type}"
            assert "private" in subnets[sid].name, f"{ng.name}: nodes in a public subnet"


def test_nothing_open_to_the_world(bundled: RenderResult) -> None:
    assert h.world_open_ingress(bundled.resources) == []
    d = bundled.stack.deployment
    for svc in bundled.of_type("kubernetes:core/v1:Service"):
        ranges = (svc.inputs.get("spec") or {}).get("loadBalancerSourceRanges") or []
        if any(c in h.WORLD for c in ranges):
            assert d.public_endpoint and any(c in h.WORLD for c in d.endpoint_allowed_cidrs), svc.name
    for s in bundled.of_type(h.SUBNET):
        assert s.inputs.get("mapPublicIpOnLaunch") in (None, False), s.name


def test_world_open_check_catches_an_open_security_group() -> None:
    open_sg = RenderedResource("aws:ec2/securityGroup:SecurityGroup", "open", {
        "ingress": [{"fromPort": 22, "toPort": 22, "protocol": "tcp", "cidrBlocks": ["0.0.0.0/0"]}]}, True)
    open_rule = RenderedResource("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "rule6",
                                 {"cidrIpv6": "::/0"}, True)
    closed = RenderedResource("aws:ec2/securityGroup:SecurityGroup", "closed", {
        "ingress": [{"cidrBlocks": ["10.0.0.0/8"]}]}, True)
    assert h.world_open_ingress([open_sg, open_rule, closed]) == ["open", "rule6"]


def test_s3_gateway_endpoint_on_private_route_tables(bundled: RenderResult) -> None:
    eps = bundled.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    assert len(eps) == 1 and eps[0].inputs["vpcEndpointType"] == "Gateway"
    assert eps[0].inputs["serviceName"] == f"com.amazonaws.{bundled.plan.region}.s3"
    private_rts = {r.id for r in bundled.of_type("aws:ec2/routeTable:RouteTable") if "private" in r.name}
    assert set(eps[0].inputs["routeTableIds"]) == private_rts


def test_stack_outputs_restate_the_plan(bundled: RenderResult) -> None:
    from infra.config import exports

    o = bundled.outputs
    t = bundled.plan.totals
    assert o[exports.GPUS] == t.gpus and o[exports.USD_PER_MONTH] == t.usd_per_month
    assert o[exports.USD_PER_MILLION_OUTPUT_TOKENS] == t.usd_per_million_output_tokens
    assert o[exports.INSTANCE_TYPES] == sorted({p.instance_type for p in bundled.plan.pools})
    assert o[exports.PLAN]["pools"][0]["instance_type"] == bundled.plan.pools[0].instance_type
    assert len(o[exports.API_COMPARISON]) == len(bundled.plan.api_comparison)


def test_resources_json_uses_engine_type_tokens_and_camel_case(bundled: RenderResult) -> None:
    doc = resources_document(bundled)
    assert set(doc[0]) == {"type", "name", "inputs"}
    ng = next((r for r in doc if r["type"] == "aws:eks/nodeGroup:NodeGroup" and r["inputs"].get("taints")), None)
    if ng is None:  # every pool on Karpenter: its NodePools are the GPU nodes (tests/test_karpenter.py)
        assert not h.node_group_pools(bundled)
        return
    assert "desiredSize" in ng["inputs"]["scalingConfig"] and "instanceTypes" in ng["inputs"]
    assert isinstance(ng["inputs"]["scalingConfig"]["desiredSize"], int)
    json.dumps(doc)  # serializable


def test_secret_inputs_are_redacted_in_the_render() -> None:
    import pulumi
    import pulumi_aws as aws

    from infra.render import plain, run_mocked

    def program() -> dict:
        aws.s3.Bucket("b", tags={"token": pulumi.Output.secret("hunter2"), "plain": "visible"})
        return {}

    resources, _ = run_mocked(factory_stack(), program)
    inputs = plain(resources[0].inputs)
    assert inputs["tags"] == "[secret]"  # Pulumi marks the whole map secret; the render keeps none of it
    assert "hunter2" not in json.dumps(inputs)


# --- variants from hand-made plans ------------------------------------------------------------

def test_spot_pool_with_on_demand_floor_and_pools_in_their_own_azs() -> None:
    od = make_pool(name="g6-12xlarge-od", instance_type="g6.12xlarge", purchase="on-demand",
                   instances_min=1, instances_desired=1, instances_max=2)
    spot = make_pool(name="g6e-12xlarge-spot", instance_type="g6e.12xlarge", gpu="L40S", purchase="spot",
                     instances_min=0, instances_desired=2, instances_max=4, local_nvme_gb=0)
    result = h.render(factory_stack(), make_plan(pools=[od, spot], stack="t"))
    cat = h.catalog()
    subnets = {s.id: s for s in result.of_type(h.SUBNET)}
    for pool, capacity in ((od, "ON_DEMAND"), (spot, "SPOT")):
        ng = h.one(result, h.NODE_GROUP, h.gpu_node_group_name(result, pool.name))
        assert ng.inputs["capacityType"] == capacity, ng.name
        assert ng.inputs["scalingConfig"]["minSize"] == pool.instances_min, ng.name
        offered = set(cat.offered_azs(pool.instance_type, "us-east-1"))
        assert {subnets[s].inputs["availabilityZoneId"] for s in ng.inputs["subnetIds"]} <= offered, ng.name
    lt_user_data = {lt.name: bool(lt.inputs.get("userData")) for lt in result.of_type(h.LAUNCH_TEMPLATE)}
    assert lt_user_data[f"llmcap-t-{od.name}-lt"] is True
    assert lt_user_data[f"llmcap-t-{spot.name}-lt"] is False


def test_bring_your_own_vpc_creates_no_network_and_uses_given_subnets() -> None:
    stack = factory_stack(deployment={"vpc_id": "vpc-0abc", "private_subnet_ids": ["subnet-a", "subnet-b"]})
    result = h.render(stack, make_plan(stack="t"))
    assert not result.of_type("aws:ec2/vpc:Vpc") and not result.of_type(h.SUBNET)
    assert not result.of_type("aws:ec2/natGateway:NatGateway")
    for ng in result.of_type(h.NODE_GROUP):
        assert ng.inputs["subnetIds"] == ["subnet-a", "subnet-b"], ng.name
    assert h.one(result, h.CLUSTER, "llmcap-t-eks").inputs["vpcConfig"]["subnetIds"] == ["subnet-a", "subnet-b"]


def test_public_api_access_only_from_configured_cidrs_and_admin_access_entries() -> None:
    admin = "arn:aws:iam::111122223333:role/platform-admin"
    stack = factory_stack(deployment={"cluster_endpoint_public_access_cidrs": ["203.0.113.0/24"],
                                      "admin_principal_arns": [admin]})
    result = h.render(stack, make_plan(stack="t"))
    vpc = h.one(result, h.CLUSTER, "llmcap-t-eks").inputs["vpcConfig"]
    assert vpc["endpointPublicAccess"] is True and vpc["publicAccessCidrs"] == ["203.0.113.0/24"]
    entries = result.of_type("aws:eks/accessEntry:AccessEntry")
    assert [e.inputs["principalArn"] for e in entries] == [admin]
    pol = result.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert pol[0].inputs["policyArn"].endswith(":cluster-access-policy/AmazonEKSClusterAdminPolicy")
    assert pol[0].inputs["accessScope"] == {"type": "cluster"}


def test_no_single_az_instance_type_without_a_second_az_for_the_cluster() -> None:
    cat = h.catalog()
    single = next((t for (t, r), azs in cat.offerings.items() if r == "us-east-1" and len(azs) == 1), None)
    if single is None:
        pytest.skip("the catalog has no single-AZ instance type in us-east-1")
    pool = make_pool(name="single", instance_type=single)
    result = h.render(factory_stack(), make_plan(pools=[pool], stack="t"))
    subnets = {s.id: s for s in result.of_type(h.SUBNET)}
    ng = h.one(result, h.NODE_GROUP, "llmcap-t-single")
    assert {subnets[s].inputs["availabilityZoneId"] for s in ng.inputs["subnetIds"]} == set(
        cat.offered_azs(single, "us-east-1"))
    cluster_subnets = h.one(result, h.CLUSTER, "llmcap-t-eks").inputs["vpcConfig"]["subnetIds"]
    assert len({subnets[s].inputs["availabilityZoneId"] for s in cluster_subnets}) >= 2


# --- deployment options -----------------------------------------------------------------------

@pytest.mark.parametrize("bad, message", [
    ({"vpc_cidr": "10.0.0.0/8"}, "/16 to /20"),
    ({"vpc_cidr": "not-a-cidr"}, "CIDR"),
    ({"cluster_endpoint_public_access_cidrs": ["1.2.3.4/33"]}, "CIDR"),
    ({"admin_principal_arns": ["alice"]}, "ARN"),
    ({"vpc_id": "vpc-1", "private_subnet_ids": ["subnet-a"]}, "two"),
    ({"private_subnet_ids": ["subnet-a", "subnet-b"]}, "vpc_id"),
    ({"kubernetes_version": "latest"}, "pattern"),
])
def test_deployment_options_reject_bad_values(bad: dict, message: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        DeploymentOptions(**bad)


def test_deployment_defaults_are_secure() -> None:
    d = DeploymentOptions()
    assert d.cluster_endpoint_public_access_cidrs == [] and not d.public_endpoint
    assert not d.weights_bucket_force_destroy and d.admin_principal_arns == []


# --- the command ------------------------------------------------------------------------------

@pytest.mark.slow  # a fresh Python importing the Pulumi SDKs (about 3 CPU s); the golden render tests render in-process
def test_render_command_writes_resources_json_without_aws_credentials(tmp_path: Path) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_CONFIG_FILE=str(tmp_path / "none"),
               PULUMI_ACCESS_TOKEN="", PATH=os.path.dirname(sys.executable) + ":/usr/bin:/bin")
    code = ("import sys; from sizing.cli import app; from sizing.cli import render_cmd as render; "
            "names = [c.name for c in app.registered_commands]; "
            "'render' in names or app.command('render')(render.render); "
            "sys.argv = ['llmcap'] + sys.argv[1:]; app()")
    out = tmp_path / "out"
    # timeout: a hang guard only (the render takes seconds)
    proc = subprocess.run([sys.executable, "-c", code, "render", str(h.ROOT / "stacks" / "Pulumi.dev.yaml"),
                           "--out", str(out)], cwd=h.ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "resources.json").read_text())
    types = {r["type"] for r in doc}
    assert {"aws:eks/nodeGroup:NodeGroup", "aws:eks/cluster:Cluster", "aws:s3/bucket:Bucket"} <= types
    assert (out / "outputs.json").exists()


def test_render_command_module_does_not_import_pulumi() -> None:
    code = ("import sys, sizing.cli, sizing.cli.render_cmd; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_aws', 'infra')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    # timeout: a hang guard only
    proc = subprocess.run([sys.executable, "-c", code], cwd=h.ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_load_balancer_controller_gets_its_role_through_pod_identity(bundled: RenderResult) -> None:
    from infra.config.names import LOAD_BALANCER_CONTROLLER_NAMESPACE, LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT

    assoc = h.referring(bundled, "aws:eks/podIdentityAssociation:PodIdentityAssociation", "serviceAccount",
                        LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT)
    assert len(assoc) == 1 and assoc[0].inputs["namespace"] == LOAD_BALANCER_CONTROLLER_NAMESPACE
    role = next(r for r in bundled.of_type("aws:iam/role:Role") if r.outputs["arn"] == assoc[0].inputs["roleArn"])
    inline = h.referring(bundled, "aws:iam/rolePolicy:RolePolicy", "role", role.id)
    actions = {a for s in h.policy(inline[0].inputs["policy"])["Statement"] for a in s["Action"]}
    assert {"elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:DescribeListenerAttributes",
            "ec2:GetSecurityGroupsForVpc"} <= actions, role.name
    assert not any(a.endswith(":*") or a == "*" for a in actions), role.name


# --- the Pulumi entry point -------------------------------------------------------------------

def _run_main(config: dict[str, object], secret_keys: list[str]) -> list[RenderedResource]:
    import runpy

    import pulumi

    from infra.render import run_mocked

    flat = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    pulumi.runtime.set_all_config(flat, secret_keys)
    try:
        resources, _ = run_mocked(factory_stack("dev"),
                                  lambda: runpy.run_path(str(h.ROOT / "infra" / "__main__.py")) and {})
    finally:
        pulumi.runtime.set_all_config({}, [])
    return resources


def test_main_reads_config_validates_plans_and_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The program on a checkout whose stack has the README's deployment settings and its saved plan."""
    from tests.test_clean_clone import clean_clone, cli, config_set_path, no_local_data

    no_local_data(monkeypatch, tmp_path / "home")
    clone = clean_clone(tmp_path / "clone")
    stack_file = clone / "stacks" / "Pulumi.dev.yaml"
    config_set_path(stack_file, "llmcap:deployment.cluster_endpoint_public_access_cidrs[0]",
                    DEPLOYABLE["cluster_endpoint_public_access_cidrs"][0])
    config_set_path(stack_file, "llmcap:deployment.docker_hub_credential_arn", DEPLOYABLE["docker_hub_credential_arn"])
    code, out = cli(clone, monkeypatch, ["plan", "stacks/Pulumi.dev.yaml", "--write"])
    assert code == 0, out
    # the README cloud block sets both secrets (dev serves a gated Meta checkpoint: the fit check needs the token)
    resources, _ = h.run_program_file(clone, "dev", {"llmcap:api_key": "k", "llmcap:hf_token": "hf_" + "t" * 34})
    gpu_groups = [r for r in resources if r.type == h.NODE_GROUP and r.inputs.get("taints")]
    assert gpu_groups and all(r.inputs["amiType"].endswith("NVIDIA") for r in gpu_groups)


# what the README's cloud steps add to a bundled stack: the address Pulumi runs from, the Docker Hub token
DEPLOYABLE = {"cluster_endpoint_public_access_cidrs": ["198.51.100.7/32"],
              "docker_hub_credential_arn":
                  "arn:aws:secretsmanager:us-east-1:111122223333:secret:ecr-pullthroughcache/docker-hub-AbCdEf"}


def test_main_stops_before_creating_anything_when_pulumi_could_not_reach_the_eks_api() -> None:
    """Issue 14 item 6: a bundled stack as shipped (private API, VPC created in the same run) fails the
    preview with one line per problem and registers no resource."""
    import pulumi

    from sizing.stack import read_config

    config = read_config(h.ROOT / "stacks" / "Pulumi.dev.yaml")
    with pytest.raises(pulumi.RunError) as err:
        _run_main({**config, "llmcap:api_key": "k"}, ["llmcap:api_key"])
    lines = str(err.value).splitlines()
    assert any(ln.startswith("[endpoint-unreachable] ") and "cluster_endpoint_public_access_cidrs" in ln
               for ln in lines), lines
    assert any(ln.startswith("[image-source] ") for ln in lines), lines


def test_main_refuses_to_run_without_an_api_key() -> None:
    import pulumi

    from sizing.stack import read_config

    config = read_config(h.ROOT / "stacks" / "Pulumi.dev.yaml")
    with pytest.raises(pulumi.RunError, match="llmcap:api_key"):
        _run_main(config, [])


def test_main_reports_config_problems_in_one_line_each() -> None:
    import pulumi

    config = {"llmcap:workload": {"model": "meta-llama/Meta-Llama-3-8B-Instruct", "traffic": {"users": 1}},
              "llmcap:api_key": "k"}
    with pytest.raises(pulumi.RunError, match="llmcap:workload"):
        _run_main(config, ["llmcap:api_key"])


def test_render_survives_a_closed_event_loop() -> None:
    import asyncio

    asyncio.run(asyncio.sleep(0))  # leaves the main thread without a current loop
    asyncio.set_event_loop(None)
    result = h.render(factory_stack(), make_plan(stack="t"))
    assert result.of_type(h.NODE_GROUP)


def test_every_pod_identity_role_trusts_only_its_account_cluster_and_service_account(bundled: RenderResult) -> None:
    """Confused-deputy conditions (issue 18 item 13): aws:SourceAccount, and the session tags EKS Pod
    Identity sets (eks-cluster-arn, kubernetes-namespace, kubernetes-service-account) pinned to the one
    association that uses the role."""
    from infra.render import MOCK_ACCOUNT

    cluster_arn = bundled.of_type(h.CLUSTER)[0].outputs["arn"]
    assocs = {a.inputs["roleArn"]: a
              for a in bundled.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")}
    addon_assocs = {p["roleArn"]: ("kube-system", p["serviceAccount"])
                    for a in bundled.of_type("aws:eks/addon:Addon")
                    for p in a.inputs.get("podIdentityAssociations") or []}
    pod_roles = [r for r in bundled.of_type("aws:iam/role:Role")
                 if "pods.eks.amazonaws.com" in json.dumps(h.policy(r.inputs["assumeRolePolicy"]))]
    assert len(pod_roles) >= 5, [r.name for r in pod_roles]  # vpc-cni, LB controller, autoscaler, vllm, loader
    for role in pod_roles:
        arn = role.outputs["arn"]
        if arn in assocs:
            ns, sa = assocs[arn].inputs["namespace"], assocs[arn].inputs["serviceAccount"]
        else:
            assert arn in addon_assocs, f"{role.name}: no pod identity association uses it"
            ns, sa = addon_assocs[arn]
        (stmt,) = h.policy(role.inputs["assumeRolePolicy"])["Statement"]
        assert stmt["Condition"]["StringEquals"] == {
            "aws:SourceAccount": MOCK_ACCOUNT, "aws:RequestTag/eks-cluster-arn": cluster_arn,
            "aws:RequestTag/kubernetes-namespace": ns, "aws:RequestTag/kubernetes-service-account": sa}, role.name


# --- images (issue 14 item 9) ----------------------------------------------------------------------

PTC_RULE = "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"


def _container_images(result: RenderResult) -> list[tuple[str, str]]:
    from infra.kubernetes.manifests import kubernetes_objects

    out = []
    for obj in kubernetes_objects(resources_document(result)):
        spec = obj.get("spec") or {}
        pods = [spec.get("template", {}).get("spec")] if "template" in spec and obj["kind"] != "NodePool" else []
        if "leaderWorkerTemplate" in spec:
            t = spec["leaderWorkerTemplate"]
            pods = [t["leaderTemplate"]["spec"], t["workerTemplate"]["spec"]]
        for pod in filter(None, pods):
            for c in [*pod.get("initContainers", []), *pod["containers"]]:
                out.append((f"{obj['kind']}/{obj['metadata']['name']}/{c['name']}", c["image"]))
    return out


def test_every_image_comes_through_the_pull_through_cache(bundled: RenderResult) -> None:
    from infra.render import MOCK_ACCOUNT

    host = f"{MOCK_ACCOUNT}.dkr.ecr.{bundled.plan.region}.amazonaws.com/"
    images = _container_images(bundled)
    assert images
    for where, ref in images:
        assert ref.startswith(host), f"{where}: {ref}"
        assert not ref.endswith(":latest"), f"{where}: {ref}"
    releases = {r.name: r.inputs["values"] for r in bundled.of_type("kubernetes:helm.sh/v3:Release")}
    assert releases["aws-load-balancer-controller"]["image"]["repository"] == (
        host + "ecr-public/eks/aws-load-balancer-controller")
    if "cluster-autoscaler" in releases:  # none when Karpenter launches every pool
        assert releases["cluster-autoscaler"]["image"]["repository"] == host + "k8s/autoscaling/cluster-autoscaler"
    if "karpenter" in releases:
        assert releases["karpenter"]["controller"]["image"]["repository"] == host + "ecr-public/karpenter/controller"
    rules = {r.inputs["ecrRepositoryPrefix"]: r.inputs for r in bundled.of_type(PTC_RULE)}
    assert rules["ecr-public"]["upstreamRegistryUrl"] == "public.ecr.aws" and "credentialArn" not in rules["ecr-public"]
    # the registry.k8s.io rule exactly when something the stack runs comes from there (the Cluster Autoscaler,
    # LWS): a Karpenter-only stack without multi-node pools has none
    from_k8s = any(ref.startswith(host + "k8s/") for _, ref in images) or any(
        host + "k8s/" in json.dumps(v) for v in releases.values())
    assert ("k8s" in rules) == from_k8s, sorted(rules)
    if from_k8s:
        assert rules["k8s"]["upstreamRegistryUrl"] == "registry.k8s.io"


def test_docker_hub_rule_uses_the_credential_and_nodes_may_fill_the_cache() -> None:
    arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:ecr-pullthroughcache/docker-hub-AbCdEf"
    result = h.render(factory_stack(deployment={"docker_hub_credential_arn": arn}), make_plan(stack="t"))
    rules = {r.inputs["ecrRepositoryPrefix"]: r.inputs for r in result.of_type(PTC_RULE)}
    assert rules["docker-hub"] == {"ecrRepositoryPrefix": "docker-hub", "upstreamRegistryUrl": "registry-1.docker.io",
                                   "credentialArn": arn}
    node_role = h.one(result, "aws:iam/role:Role", "llmcap-t-node")
    (pol,) = [p for p in result.of_type("aws:iam/rolePolicy:RolePolicy")
              if p.inputs["role"] == node_role.outputs["name"]]
    (stmt,) = h.policy(pol.inputs["policy"])["Statement"]
    assert stmt["Action"] == ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"]
    assert sorted(stmt["Resource"]) == sorted(f"arn:aws:ecr:us-east-1:123456789012:repository/{p}/*"
                                              for p in ("docker-hub", "ecr-public", "k8s"))


def test_a_registry_the_user_names_replaces_the_cache() -> None:
    reg = "111122223333.dkr.ecr.us-east-1.amazonaws.com/mirror"
    result = h.render(factory_stack(deployment={"image_registry": reg}), make_plan(stack="t"))
    assert not result.of_type(PTC_RULE)
    for where, ref in _container_images(result):
        assert ref.startswith(reg + "/"), f"{where}: {ref}"
    router_ref = f"{reg}/docker-hub/lmcache/lmstack-router:v0.1.12"
    assert ("Deployment/llmcap-router/router", router_ref) in _container_images(result)


@pytest.mark.parametrize("bad, message", [
    ({"docker_hub_credential_arn": "arn:aws:secretsmanager:us-east-1:111122223333:secret:dockerhub"},
     "ecr-pullthroughcache/"),
    ({"image_registry": "https://registry.example.com"}, "without a scheme"),
])
def test_image_source_options_reject_bad_values(bad: dict, message: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        DeploymentOptions(**bad)
