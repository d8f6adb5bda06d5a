"""GPU node groups, one per plan pool: NVIDIA AMI, the pool's instance type, scaling bounds from
the plan, a GPU taint only serving pods tolerate, pool/GPU labels, and a launch template with
IMDSv2 required, an encrypted root volume sized for the vLLM image plus the model cache, and the
instance-store NVMe (RAID0) used for containerd and the cache where the instance has one.

Cluster Autoscaler: each group carries the auto-discovery tags and the node-template tags (labels,
the GPU taint, GPUs per node) that let it scale a group up from zero nodes. EKS puts the discovery tags
on a managed node group's Auto Scaling group itself but not the node-template ones, so those are also
set on the Auto Scaling group (cluster-autoscaler/cloudprovider/aws/README.md, "Auto-Discovery Setup"
and "Scaling a node group to 0")."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_aws as aws
import yaml

from infra.aws.addons_iam import AUTOSCALER_ENABLED_TAG, autoscaler_owner_tag
from infra.aws.efa import EFA_SOURCE, efa_network_interfaces
from infra.config.efa_cards import EFA_RESOURCE, efa_per_pod
from infra.config.names import COMPONENT_PREFIX, GPU_LABEL, GPU_TAINT_KEY, GPU_TAINT_VALUE, POOL_LABEL, ROLE_LABEL

if TYPE_CHECKING:
    from infra.config.platform import Platform
    from sizing.plan import Plan, Pool

# EKS CreateNodegroup capacityType per plan purchase: an ODCR is on-demand capacity the launch template
# targets; a Capacity Block is CAPACITY_BLOCK with the launch template's marketType capacity-block
# (https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html)
CAPACITY_TYPES = {"on-demand": "ON_DEMAND", "spot": "SPOT", "reservation": "ON_DEMAND",
                  "capacity-block": "CAPACITY_BLOCK"}
MIME_BOUNDARY = "LLMCAP-NODECONFIG"
NODE_TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template"
GPU_RESOURCE = "nvidia.com/gpu"


def nodeadm_user_data(local_storage_strategy: str) -> str:
    """MIME multipart user data with a nodeadm NodeConfig that puts the instance store into use.
    EKS merges its own NodeConfig (cluster endpoint, CA) into managed node groups' user data."""
    node_config = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
                   "spec": {"instance": {"localStorage": {"strategy": local_storage_strategy}}}}
    body = yaml.safe_dump(node_config, sort_keys=False)
    doc = (f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\n\n'
           f"--{MIME_BOUNDARY}\nContent-Type: application/node.eks.aws\n\n---\n{body}\n--{MIME_BOUNDARY}--\n")
    return base64.b64encode(doc.encode()).decode()


def capacity_args(pool: Pool) -> dict[str, Any]:
    """Launch template arguments (pulumi_aws names) that put a pool on its reservation: the target
    (an id, or a resource group of reservations) and, for a Capacity Block, marketType capacity-block."""
    rid = pool.capacity_reservation_id
    if not rid:
        return {}
    target = ({"capacity_reservation_resource_group_arn": rid} if rid.startswith("arn:")
              else {"capacity_reservation_id": rid})
    out: dict[str, Any] = {"capacity_reservation_specification": {"capacity_reservation_target": target}}
    if pool.purchase == "capacity-block":
        # EKS user guide, "Create a managed node group with Capacity Blocks for ML": the launch template
        # sets MarketType capacity-block, the CapacityReservationTarget and the InstanceType (so the node
        # group names none: CreateNodegroup fails when both do)
        out["instance_market_options"] = {"market_type": "capacity-block"}
        out["instance_type"] = pool.instance_type
    return out


def node_launch_template(name: str, *, platform: Platform, root_gib: int, user_data: str | None,
                         tags: dict[str, str], parent: pulumi.Resource, **extra: Any) -> aws.ec2.LaunchTemplate:
    """A launch template for an EKS managed node group: IMDSv2 only, encrypted gp3 root volume.
    No AMI, instance type or instance profile: the node group supplies those. `extra`: the reservation
    target, EFA interfaces, placement group (pulumi_aws argument names)."""
    return aws.ec2.LaunchTemplate(
        name,
        metadata_options={"http_endpoint": "enabled", "http_tokens": "required",
                          "http_put_response_hop_limit": platform.imds_hop_limit},
        block_device_mappings=[{"device_name": platform.root_device_name,
                                "ebs": {"volume_size": root_gib, "volume_type": platform.root_volume_type,
                                        "encrypted": "true", "delete_on_termination": "true"}}],
        user_data=user_data,
        update_default_version=True,
        tag_specifications=[{"resource_type": "instance", "tags": tags},
                            {"resource_type": "volume", "tags": tags}],
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent),
        **extra,
    )


@dataclass
class GpuPoolArgs:
    """One node group, straight from a plan pool."""

    pool: Pool
    subnet_ids: pulumi.Input[list[str]]  # private subnets in AZs that offer the instance type
    root_volume_gib: int
    use_instance_store: bool
    efa: bool = False  # EFA interfaces, a cluster placement group and the EFA security group (infra/aws/efa.py)

    @staticmethod
    def from_pool(pool: Pool, subnet_ids: pulumi.Input[list[str]], platform: Platform,
                  model_cache_on_instance_store: bool, efa: bool = False) -> GpuPoolArgs:
        return GpuPoolArgs(pool=pool, subnet_ids=subnet_ids, root_volume_gib=pool.root_volume_gib,
                           use_instance_store=model_cache_on_instance_store and pool.local_nvme_gb > 0, efa=efa)


@dataclass
class GpuNodeGroupsArgs:
    cluster_name: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    pools: list[GpuPoolArgs]
    platform: Platform
    tags: dict[str, str] = field(default_factory=dict)
    vpc_id: pulumi.Input[str] | None = None  # for the EFA security group
    cluster_security_group_id: pulumi.Input[str] | None = None  # EFA interfaces carry it (nodes reach the cluster)

    @staticmethod
    def from_plan(plan: Plan, platform: Platform, model_cache_on_instance_store: bool,
                  cluster_name: pulumi.Input[str], node_role_arn: pulumi.Input[str],
                  subnet_ids: dict[str, pulumi.Input[list[str]]], tags: dict[str, str],
                  efa_pools: frozenset[str] = frozenset(), vpc_id: pulumi.Input[str] | None = None,
                  cluster_security_group_id: pulumi.Input[str] | None = None) -> GpuNodeGroupsArgs:
        return GpuNodeGroupsArgs(
            cluster_name=cluster_name, node_role_arn=node_role_arn,
            pools=[GpuPoolArgs.from_pool(p, subnet_ids[p.name], platform, model_cache_on_instance_store,
                                         efa=p.name in efa_pools)
                   for p in plan.pools],
            platform=platform, tags=tags, vpc_id=vpc_id, cluster_security_group_id=cluster_security_group_id)


def gpu_labels(pool: Pool) -> dict[str, str]:
    return {POOL_LABEL: pool.name, GPU_LABEL: pool.gpu, ROLE_LABEL: "gpu"}


def autoscaler_discovery_tags(cluster_name: str) -> dict[str, str]:
    """What `--node-group-auto-discovery=asg:tag=...` (the chart's autoDiscovery.clusterName) looks for."""
    return {AUTOSCALER_ENABLED_TAG: "true", autoscaler_owner_tag(cluster_name): "owned"}


def node_template_tags(pool: Pool) -> dict[str, str]:
    """What a node of the pool would look like, for the Cluster Autoscaler to scale up from zero nodes."""
    tags = {f"{NODE_TEMPLATE_TAG}/label/{k}": v for k, v in gpu_labels(pool).items()}
    tags[f"{NODE_TEMPLATE_TAG}/taint/{GPU_TAINT_KEY}"] = f"{GPU_TAINT_VALUE}:NoSchedule"
    tags[f"{NODE_TEMPLATE_TAG}/resources/{GPU_RESOURCE}"] = str(pool.gpus_per_instance)
    # a pool on EFA: the vpc.amazonaws.com/efa its pods request (cluster-autoscaler/cloudprovider/aws/README.md:
    # "Cluster Autoscaler can also determine the resources provided by each Auto Scaling Group via tags. The tag is
    # of the format k8s.io/cluster-autoscaler/node-template/resources/<resource-name>")
    if efa_per_pod(pool):
        tags[f"{NODE_TEMPLATE_TAG}/resources/{EFA_RESOURCE}"] = str(efa_per_pod(pool))
    return tags


def _autoscaling_group_name(resources: Sequence[aws.eks.outputs.NodeGroupResource]) -> str:
    """The Auto Scaling group behind a managed node group (EKS creates exactly one)."""
    groups = resources[0].autoscaling_groups if resources else None
    if not groups or not groups[0].name:
        raise ValueError("EKS returned a managed node group without its Auto Scaling group")
    return groups[0].name


class GpuNodeGroups(pulumi.ComponentResource):
    node_groups: dict[str, aws.eks.NodeGroup]

    def __init__(self, name: str, args: GpuNodeGroupsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{COMPONENT_PREFIX}GpuNodeGroups", name, None, opts)
        self.node_groups = {}
        for pa in args.pools:
            self.node_groups[pa.pool.name] = self._node_group(name, pa, args)
        self.register_outputs({"nodeGroups": {k: ng.node_group_name for k, ng in self.node_groups.items()}})

    def _efa_args(self, name: str, pool: Pool, args: GpuNodeGroupsArgs, tags: dict[str, str]) -> dict[str, Any]:
        """A cluster placement group, a security group that lets EFA traffic through between its members
        ("allows all inbound and outbound traffic to and from the security group itself", EFA_SOURCE), and
        one EFA interface per network card carrying it and the cluster security group."""
        if args.vpc_id is None or args.cluster_security_group_id is None:
            raise ValueError(f"pool {pool.name}: EFA needs the VPC and the cluster security group")
        pg = aws.ec2.PlacementGroup(f"{name}-{pool.name}-pg", strategy="cluster", tags=tags,
                                    opts=pulumi.ResourceOptions(parent=self))
        sg = aws.ec2.SecurityGroup(f"{name}-{pool.name}-efa", vpc_id=args.vpc_id,
                                   description=f"EFA between {pool.name} nodes ({EFA_SOURCE})", tags=tags,
                                   opts=pulumi.ResourceOptions(parent=self))
        for direction in ("ingress", "egress"):
            rule = aws.vpc.SecurityGroupIngressRule if direction == "ingress" else aws.vpc.SecurityGroupEgressRule
            rule(f"{name}-{pool.name}-efa-{direction}", security_group_id=sg.id, ip_protocol="-1",
                 referenced_security_group_id=sg.id, description=f"EFA: all traffic {direction} within the group",
                 opts=pulumi.ResourceOptions(parent=sg))
        return {"placement": {"group_name": pg.name},
                "network_interfaces": efa_network_interfaces(pool.instance_type,
                                                             [args.cluster_security_group_id, sg.id])}

    def _node_group(self, name: str, pa: GpuPoolArgs, args: GpuNodeGroupsArgs) -> aws.eks.NodeGroup:
        pool = pa.pool
        if pool.purchase not in CAPACITY_TYPES:
            raise ValueError(f"pool {pool.name}: purchase {pool.purchase!r} is not one of {list(CAPACITY_TYPES)}")
        tags = {**args.tags, POOL_LABEL: pool.name}
        template = node_template_tags(pool)
        group_tags = pulumi.Output.from_input(args.cluster_name).apply(
            lambda c: {**tags, **autoscaler_discovery_tags(c), **template})
        extra = capacity_args(pool)
        if pa.efa:
            extra.update(self._efa_args(name, pool, args, tags))
        lt = node_launch_template(
            f"{name}-{pool.name}-lt", platform=args.platform, root_gib=pa.root_volume_gib,
            user_data=nodeadm_user_data(args.platform.local_storage_strategy) if pa.use_instance_store else None,
            tags=tags, parent=self, **extra)
        ng = aws.eks.NodeGroup(
            f"{name}-{pool.name}",
            cluster_name=args.cluster_name,
            node_role_arn=args.node_role_arn,
            subnet_ids=pa.subnet_ids,
            ami_type=args.platform.ami_type_gpu,
            instance_types=None if "instance_type" in extra else [pool.instance_type],
            capacity_type=CAPACITY_TYPES[pool.purchase],
            scaling_config={"min_size": pool.instances_min, "desired_size": pool.instances_desired,
                            "max_size": pool.instances_max},
            update_config={"max_unavailable": args.platform.node_update_max_unavailable},
            labels=gpu_labels(pool),
            taints=[{"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": "NO_SCHEDULE"}],
            launch_template={"id": lt.id, "version": lt.latest_version.apply(str)},
            tags=group_tags,
            # the Cluster Autoscaler moves the desired size between min and max; a later `pulumi up`
            # must not reset it to the plan's figure
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["scalingConfig.desiredSize"]),
        )
        # node-group tags do not reach the Auto Scaling group; the autoscaler reads them there
        asg_name = ng.resources.apply(_autoscaling_group_name)
        for key, value in sorted(template.items()):
            slug = key.removeprefix(NODE_TEMPLATE_TAG + "/").replace("/", "-")  # e.g. taint-nvidia.com-gpu
            aws.autoscaling.Tag(f"{name}-{pool.name}-{slug}", autoscaling_group_name=asg_name,
                                tag={"key": key, "value": value, "propagate_at_launch": False},
                                opts=pulumi.ResourceOptions(parent=ng))
        return ng
