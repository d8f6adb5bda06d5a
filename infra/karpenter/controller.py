"""Karpenter on the cluster (`llmcap:infra:Karpenter`, issue 28): the controller as a pinned Helm release on the
system nodes with its EKS Pod Identity role (Karpenter's documented controller policy, scoped to this cluster),
the node role it launches GPU nodes with (and its EC2_LINUX access entry, so those nodes can join), the
`karpenter.sh/discovery` tags on the pools' subnets and the cluster security group, and one EC2NodeClass and
one NodePool per plan pool (built in infra/karpenter/nodes.py), and the interruption queue with the EventBridge rules
that feed it (infra/karpenter/interruption.py, Karpenter's own CloudFormation template), named in the controller's
settings.interruptionQueue so Spot, rebalance, Health and Capacity Reservation notices drain a node ahead of its
termination."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from infra.aws.cluster import NODE_POLICIES
from infra.aws.iam import partition, pod_identity_trust_policy, role_with_managed_policies, service_trust_policy
from infra.config import settings
from infra.config.efa_cards import pool_uses_efa
from infra.config.names import COMPONENT_PREFIX
from infra.karpenter import interruption
from infra.karpenter import nodes as karpenter
from infra.kubernetes.components.addons import chart_image_values

if TYPE_CHECKING:
    from infra.config.image_lock import ImagePins
    from infra.config.platform import Platform
    from sizing.plan import Pool

CHART = "karpenter"


@dataclass
class KarpenterArgs:
    cluster_name: pulumi.Input[str]
    cluster_arn: pulumi.Input[str]
    cluster_security_group_id: pulumi.Input[str]
    region: str
    platform: Platform
    pools: list[Pool]
    zone_ids: dict[str, list[str]]  # pool name -> the AZ ids its NodePool may launch in
    vcpus: dict[str, int]  # instance type -> vCPUs (the catalog's), for the NodePool cpu limit
    subnet_ids: list[pulumi.Input[str]]  # the private subnets the nodes may use (tagged for discovery)
    registry_host: pulumi.Input[str] | None = None  # the pull-through cache (infra/aws/ecr.py)
    image_pins: ImagePins | None = None  # the locked digests (infra/config/image_lock.py), with registry_host
    tags: dict[str, str] = field(default_factory=dict)
    after: list[pulumi.Resource] = field(default_factory=list)  # system nodes, core add-ons


class Karpenter(pulumi.ComponentResource):
    release: k8s.helm.v3.Release
    node_pools: dict[str, k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{COMPONENT_PREFIX}Karpenter", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        chart = settings.chart(CHART)
        node_role = role_with_managed_policies(f"{name}-karpenter-node", service_trust_policy("ec2.amazonaws.com"),
                                               NODE_POLICIES, args.tags, self, "GPU nodes Karpenter launches")
        entry = aws.eks.AccessEntry(f"{name}-karpenter-node", cluster_name=args.cluster_name,
                                    principal_arn=node_role.arn, type="EC2_LINUX", tags=args.tags, opts=child)
        role = aws.iam.Role(f"{name}-karpenter", assume_role_policy=pod_identity_trust_policy(
                                args.cluster_arn, chart.namespace, karpenter.KARPENTER_SERVICE_ACCOUNT),
                            description="Karpenter controller through EKS Pod Identity", tags=args.tags, opts=child)
        queue = self._interruption_queue(name, args)
        policy = pulumi.Output.all(partition(), aws.get_caller_identity_output().account_id, args.cluster_name,
                                   node_role.arn, queue.arn).apply(
            lambda a: _with_statement(karpenter.controller_policy(partition=a[0], region=args.region,
                                                                  account_id=a[1], cluster_name=a[2],
                                                                  node_role_arn=a[3]),
                                      interruption.controller_statement(a[4])))
        aws.iam.RolePolicy(f"{name}-karpenter", role=role.id, policy=policy,
                           opts=pulumi.ResourceOptions(parent=role))
        association = aws.eks.PodIdentityAssociation(
            f"{name}-karpenter", cluster_name=args.cluster_name, namespace=chart.namespace,
            service_account=karpenter.KARPENTER_SERVICE_ACCOUNT, role_arn=role.arn, tags=args.tags, opts=child)
        discovery = [aws.ec2.Tag(f"{name}-karpenter-discovery-sg", resource_id=args.cluster_security_group_id,
                                 key=karpenter.DISCOVERY_TAG, value=args.cluster_name, opts=child)]
        discovery += [aws.ec2.Tag(f"{name}-karpenter-discovery-subnet-{i}", resource_id=sid,
                                  key=karpenter.DISCOVERY_TAG, value=args.cluster_name, opts=child)
                      for i, sid in enumerate(args.subnet_ids)]
        values = pulumi.Output.all(args.cluster_name, args.registry_host, queue.name).apply(
            lambda a: karpenter.controller_values(
                a[0], karpenter.KARPENTER_SERVICE_ACCOUNT, chart_image_values(CHART, a[1], args.image_pins),
                interruption_queue=a[2]))
        self.release = k8s.helm.v3.Release(
            chart.name, name=chart.name, chart=chart.chart, version=chart.version, namespace=chart.namespace,
            create_namespace=False, values=values,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.after, association, entry]))
        self.node_pools = {}
        for pool in args.pools:
            self.node_pools[pool.name] = self._pool(pool, node_role.name, args, [self.release, *discovery])
        self.register_outputs({"release": self.release.status,
                               "nodePools": {p.name: karpenter.nodeclass_name(p) for p in args.pools}})

    def _interruption_queue(self, name: str, args: KarpenterArgs) -> aws.sqs.Queue:
        """KarpenterInterruptionQueue, its policy and the EventBridge rules targeting it (interruption.py)."""
        child = pulumi.ResourceOptions(parent=self)
        q = interruption.queue_settings()
        queue = aws.sqs.Queue(f"{name}-karpenter-interruption", name=args.cluster_name,
                              message_retention_seconds=q["MessageRetentionPeriod"],
                              sqs_managed_sse_enabled=q["SqsManagedSseEnabled"], tags=args.tags, opts=child)
        aws.sqs.QueuePolicy(f"{name}-karpenter-interruption", queue_url=queue.url,
                            policy=queue.arn.apply(lambda arn: json.dumps(interruption.queue_policy(arn))),
                            opts=pulumi.ResourceOptions(parent=queue))
        for rule_name, pattern in interruption.event_patterns().items():
            rule = aws.cloudwatch.EventRule(f"{name}-karpenter-{rule_name}", event_pattern=json.dumps(pattern),
                                            description=f"Karpenter interruption queue: {rule_name}",
                                            tags=args.tags, opts=pulumi.ResourceOptions(parent=queue))
            aws.cloudwatch.EventTarget(f"{name}-karpenter-{rule_name}", rule=rule.name, arn=queue.arn,
                                       target_id="KarpenterInterruptionQueueTarget",
                                       opts=pulumi.ResourceOptions(parent=rule))
        return queue

    def _pool(self, pool: Pool, node_role_name: pulumi.Output[str], args: KarpenterArgs,
              after: list[pulumi.Resource]) -> k8s.apiextensions.CustomResource:
        opts = pulumi.ResourceOptions(parent=self, depends_on=after)
        shape = karpenter.ec2_node_class(pool, cluster_name="-", node_role_name="-", platform=args.platform)
        # a pool on EFA: its own cluster placement group, named in the EC2NodeClass (Karpenter does not create one)
        pg_name: pulumi.Input[str] = pulumi.Output.from_input("")
        if pool_uses_efa(pool):
            pg = aws.ec2.PlacementGroup(f"{shape['metadata']['name']}-pg", strategy="cluster", tags=args.tags,
                                        opts=pulumi.ResourceOptions(parent=self))
            pg_name = pg.name
        spec = pulumi.Output.all(args.cluster_name, node_role_name, pg_name).apply(
            lambda a: karpenter.ec2_node_class(pool, cluster_name=a[0], node_role_name=a[1],
                                               platform=args.platform, placement_group=a[2] or None)["spec"])
        node_class = k8s.apiextensions.CustomResource(
            f"ec2nodeclass-{shape['metadata']['name']}", api_version=shape["apiVersion"], kind=shape["kind"],
            metadata=shape["metadata"], spec=spec, opts=opts)
        np = karpenter.node_pool(pool, zone_ids=args.zone_ids[pool.name],
                                 vcpus_per_instance=args.vcpus[pool.instance_type])
        return k8s.apiextensions.CustomResource(
            f"nodepool-{np['metadata']['name']}", api_version=np["apiVersion"], kind=np["kind"],
            metadata=np["metadata"], spec=np["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*after, node_class]))


def _with_statement(policy_json: str, statement: dict[str, object]) -> str:
    """The controller policy document with one more statement (the interruption queue's)."""
    doc = json.loads(policy_json)
    doc["Statement"].append(statement)
    return json.dumps(doc)
