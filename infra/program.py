"""The whole program as one pure function of a validated Stack and its Plan: `__main__` (real
`pulumi up`) and `infra.render` (offline, under Pulumi's mock engine) both call `build_program`.
Components never read config; everything arrives here as typed arguments."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi

from infra.aws.addons_iam import cluster_autoscaler_identity
from infra.aws.cluster import EksCluster, EksClusterArgs
from infra.aws.ecr import PullThroughCache, PullThroughCacheArgs
from infra.aws.efa import uses_efa
from infra.aws.endpoint_certificate import EndpointCertificate
from infra.aws.network import Network, NetworkArgs, choose_az_ids
from infra.aws.nodegroups import GpuNodeGroups, GpuNodeGroupsArgs
from infra.aws.storage import READ_ACTIONS, WRITE_ACTIONS, PodAccess, WeightsStore, WeightsStoreArgs
from infra.config import exports, settings
from infra.config.names import (
    NAMESPACE,
    SERVING_SERVICE_ACCOUNT,
    WEIGHTS_LOADER_SERVICE_ACCOUNT,
    served_checkpoints,
    weights_prefix,
)
from infra.config.platform import load_platform
from infra.config.registry import upstreams_needed
from infra.fit.check import FitContext, NotDeployable, check_deployable
from infra.karpenter.controller import Karpenter, KarpenterArgs
from infra.karpenter.nodes import karpenter_pools
from infra.kubernetes.components.addons import ClusterAddons, ClusterAddonsArgs
from infra.kubernetes.components.kubernetes_app import KubernetesApp, KubernetesAppArgs
from infra.kubernetes.pulled_images import pulled_image_keys

if TYPE_CHECKING:
    from infra.config.image_lock import ImagePins
    from infra.render import RenderResult
    from sizing.catalog.lookup import Catalog
    from sizing.plan import Plan
    from sizing.stack import Stack


@dataclass(frozen=True)
class Secrets:
    """Secret inputs: from `pulumi config set --secret` in a real run, redacted markers in a render."""

    api_key: pulumi.Input[str]
    hf_token: pulumi.Input[str] | None = None


def resource_prefix(stack: Stack) -> str:
    return f"llmcap-{stack.name}"


def plan_summary(plan: Plan) -> dict[str, Any]:
    """The stack outputs that restate the plan (never recomputed here)."""
    t = plan.totals
    return {
        exports.GPUS: t.gpus,
        exports.INSTANCE_TYPES: sorted({p.instance_type for p in plan.pools}),
        exports.USD_PER_HOUR: t.usd_per_hour,
        exports.USD_PER_MONTH: t.usd_per_month,
        exports.ALL_IN_USD_PER_MONTH: t.all_in_usd_per_month,
        exports.USD_PER_MILLION_OUTPUT_TOKENS: t.usd_per_million_output_tokens,
        exports.API_COMPARISON: [a.model_dump() for a in plan.api_comparison],
        exports.PLAN: json.loads(plan.to_json()),
    }


def pool_subnet_ids(network: Network, plan: Plan, offered: dict[str, tuple[str, ...]], catalog: Catalog
                    ) -> dict[str, pulumi.Input[list[str]]]:
    """Per pool: the private subnets in AZs that offer its instance type (all of a VPC you bring); a pool
    on a reservation only its AZ's, and an EFA pool only one AZ's (a cluster placement group is one AZ)."""
    if not network.private_subnet_ids_by_az:
        return {p.name: network.private_subnet_ids for p in plan.pools}
    by_az = network.private_subnet_ids_by_az
    out: dict[str, pulumi.Input[list[str]]] = {}
    for p in plan.pools:
        azs = [az for az in by_az if az in offered[p.instance_type]]
        if p.availability_zone_id:
            azs = [az for az in azs if az == p.availability_zone_id]
        elif uses_efa(catalog, p):
            azs = azs[:1]
        out[p.name] = pulumi.Output.all(*[by_az[az] for az in azs])
    return out


def build_program(stack: Stack, plan: Plan, catalog: Catalog, secrets: Secrets, pins: ImagePins,
                  deploying: bool = False) -> dict[str, Any]:
    """Create every resource for `stack` as planned; return the stack outputs (name -> value/Output).

    `pins`: the image digests the stack deploys (infra/config/image_lock.py `resolve_pins`, read by the caller
    from the image lock beside the stack file).

    Runs the deployability check first (infra/fit/check.py): when the plan would not come up, raises
    NotDeployable (one line per problem) before any resource is registered. `deploying`: a real
    `pulumi preview`/`up` (infra/__main__.py), where the rules that need the machine's reach and the
    account's secrets apply too (EKS API reachable, Docker Hub credential); False for an offline render."""
    api_key = secrets.api_key if isinstance(secrets.api_key, str) else None
    report = check_deployable(FitContext(stack=stack, plan=plan, catalog=catalog, api_key=api_key,
                                         extra={"deploying": deploying, "image_pins": pins,
                                                "hf_token_set": secrets.hf_token is not None}))
    if not report.ok:
        raise NotDeployable(report)
    d = stack.deployment
    platform = load_platform(d)
    name = resource_prefix(stack)
    tags = {"llmcap:stack": stack.name, "llmcap:managed-by": "pulumi"}

    offered = {p.instance_type: catalog.offered_azs(p.instance_type, plan.region) for p in plan.pools}
    region_az_ids = sorted({az for (_, region), azs in catalog.offerings.items() if region == plan.region
                            for az in azs})
    az_ids = [] if d.vpc_id else choose_az_ids(plan, offered, region_az_ids, platform.max_azs)
    network = Network(name, NetworkArgs(
        name=name, region=plan.region, vpc_cidr=d.vpc_cidr, az_ids=az_ids, nat_gateways=plan.platform.nat_gateways,
        tags=tags, vpc_id=d.vpc_id, private_subnet_ids=d.private_subnet_ids, public_subnet_ids=d.public_subnet_ids))

    system_nodes = plan.platform.system_nodes  # sized once by the planner (sizing/planning/system_nodes.py)
    cluster = EksCluster(name, EksClusterArgs(
        region=plan.region, platform=platform, private_subnet_ids=network.cluster_subnet_ids,
        system_nodes=system_nodes,
        public_access_cidrs=list(d.cluster_endpoint_public_access_cidrs),
        admin_principal_arns=list(d.admin_principal_arns), tags=tags))

    # Karpenter's pools get a NodePool instead of a managed node group (infra/karpenter/nodes.py)
    on_karpenter = karpenter_pools(d.provisioner, plan.pools)
    # every image llmcap sets comes through the account's ECR pull-through cache (or the user's registry)
    charts = set(settings.chart_keys())
    chart_upstreams = [img.registry for key in pulled_image_keys(plan, d.provisioner)
                       if key in charts and (img := settings.chart_image_pin(key))]
    cache = PullThroughCache(name, PullThroughCacheArgs(
        region=plan.region, deployment=d, upstreams=[*upstreams_needed(), *chart_upstreams],
        node_role_name=cluster.node_role.name), opts=pulumi.ResourceOptions(parent=cluster))

    gpu_args = GpuNodeGroupsArgs.from_plan(
        plan, platform, d.model_cache_on_instance_store, cluster_name=cluster.name,
        node_role_arn=cluster.node_role.arn, subnet_ids=pool_subnet_ids(network, plan, offered, catalog), tags=tags,
        efa_pools=frozenset(p.name for p in plan.pools if uses_efa(catalog, p)), vpc_id=network.vpc_id,
        cluster_security_group_id=cluster.cluster.vpc_config.cluster_security_group_id)
    gpu_args.pools = [pa for pa in gpu_args.pools if pa.pool not in on_karpenter]
    gpu_groups = GpuNodeGroups(name, gpu_args, opts=pulumi.ResourceOptions(depends_on=cluster.addons))
    node_launchers: list[pulumi.Resource] = list(gpu_groups.node_groups.values())
    if on_karpenter:
        zones = set(az_ids) or {az for p in on_karpenter for az in offered[p.instance_type]}
        provisioner = Karpenter(name, KarpenterArgs(
            cluster_name=cluster.name, cluster_arn=cluster.cluster.arn,
            cluster_security_group_id=cluster.cluster.vpc_config.cluster_security_group_id, region=plan.region,
            platform=platform, pools=on_karpenter,
            zone_ids={p.name: [p.availability_zone_id] if p.availability_zone_id
                      else sorted(zones & set(offered[p.instance_type])) for p in on_karpenter},
            vcpus={p.instance_type: catalog.instances[p.instance_type].vcpus for p in on_karpenter},
            subnet_ids=list(network.private_subnet_ids_by_az.values()) or list(d.private_subnet_ids or []),
            registry_host=cache.registry_host, image_pins=pins, tags=tags,
            after=[cluster.system_node_group, *cluster.addons]),
            opts=pulumi.ResourceOptions(provider=cluster.provider))
        node_launchers += list(provisioner.node_pools.values())

    # one S3 prefix per checkpoint the pools serve (pool.vllm.model), never the base model's
    prefixes = {c: weights_prefix(c) for c in served_checkpoints(plan.pools)}
    store = WeightsStore(name, WeightsStoreArgs(
        cluster_name=cluster.name, cluster_arn=cluster.cluster.arn, namespace=NAMESPACE,
        prefixes=list(prefixes.values()), platform=platform,
        access=[PodAccess(SERVING_SERVICE_ACCOUNT, READ_ACTIONS, "vLLM pods: read the model's weights"),
                PodAccess(WEIGHTS_LOADER_SERVICE_ACCOUNT, WRITE_ACTIONS, "weights job: copy the model from HF")],
        force_destroy=d.weights_bucket_force_destroy, tags=tags))

    # the AWS Load Balancer Controller (the router's NLB) and the Cluster Autoscaler (GPU nodes follow
    # KEDA's replicas), on the system nodes
    # (no Cluster Autoscaler when Karpenter launches every GPU pool)
    autoscaled = bool(gpu_groups.node_groups)
    identities = [cluster_autoscaler_identity(name, cluster.name, cluster.cluster.arn, tags,
                                              parent=cluster).association] if autoscaled else []
    addons = ClusterAddons(name, ClusterAddonsArgs(
        cluster_name=cluster.name, vpc_id=network.vpc_id, region=plan.region, registry_host=cache.registry_host,
        image_pins=pins,
        after=[cluster.system_node_group, *cluster.addons, cluster.load_balancer_controller_pod_identity,
               *identities], cluster_autoscaler=autoscaled),
        opts=pulumi.ResourceOptions(provider=cluster.provider))

    # TLS on the endpoint by default: the stack's certificate, else one the deployment creates (issue 32)
    endpoint_cert = (None if d.tls_certificate_arn or d.allow_plain_http_endpoint
                     else EndpointCertificate(name, plan.region, stack.name, tags))

    app = KubernetesApp(name, KubernetesAppArgs(
        plan=plan, region=stack.region, deployment=d, weights_bucket=store.bucket.bucket, weights_prefixes=prefixes,
        service_account_name=SERVING_SERVICE_ACCOUNT, namespace=NAMESPACE, hf_token=secrets.hf_token,
        api_key=secrets.api_key, load_balancer_controller=addons.load_balancer_controller,
        registry_host=cache.registry_host, image_pins=pins, system_nodes=system_nodes.desired,
        system_nodes_max=system_nodes.max_size,
        certificate_arn=endpoint_cert.arn if endpoint_cert is not None else None),
        opts=pulumi.ResourceOptions(provider=cluster.provider,
                                    depends_on=[*node_launchers, cluster.system_node_group,
                                                *cluster.addons, store]))

    return {
        exports.ENDPOINT: app.endpoint,
        exports.CLUSTER_NAME: cluster.name,
        exports.KUBECONFIG: cluster.kubeconfig,
        exports.VPC_ID: network.vpc_id,
        exports.WEIGHTS_BUCKET: store.bucket.bucket,
        exports.WEIGHTS_PREFIX: next(iter(prefixes.values())) if len(prefixes) == 1 else list(prefixes.values()),
        **plan_summary(plan),
        # the CA the clients trust when the deployment created the endpoint's certificate
        **({exports.ENDPOINT_CA_CERTIFICATE: endpoint_cert.ca_certificate_pem} if endpoint_cert is not None else {}),
    }


def render_stack(stack: Stack, plan: Plan, catalog: Catalog, pins: ImagePins) -> RenderResult:
    """This program for `stack` under Pulumi's mock engine (infra/render.py: no credentials, no Pulumi
    CLI). Secrets are redacted markers, never real values."""
    from infra.render import REDACTED, RenderResult, run_mocked

    secrets = Secrets(api_key=REDACTED, hf_token=REDACTED)
    resources, outputs = run_mocked(stack, lambda: build_program(stack, plan, catalog, secrets, pins))
    return RenderResult(stack=stack, plan=plan, resources=resources, outputs=outputs)
