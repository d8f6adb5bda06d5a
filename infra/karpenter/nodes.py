"""Karpenter as the GPU node provisioner (issue 28, `llmcap:deployment.provisioner: karpenter`): the
EC2NodeClass, one NodePool per plan pool and the controller's Helm values, as plain dicts (no pulumi;
infra/karpenter/controller.py applies them). Karpenter v1 APIs, pinned in infra/data/versions.yaml
(chart `karpenter`); shapes checked against the CRD schemas of that release
(tests/data/karpenter_crd_schemas.json, tests/test_karpenter.py).

Sources (github.com/aws/karpenter-provider-aws at v1.14.1, website/content/en/v1.14):
- concepts/nodeclasses.md: `amiSelectorTerms` `alias: al2023@latest` selects the EKS-optimized AL2023 AMIs;
  "Unless using an alias, Karpenter cannot detect requirements other than architecture ... (e.g. accelerated
  GPU AMIs)": with the alias it picks the NVIDIA variant for GPU instance types
  (pkg/providers/amifamily/al2023.go: x86_64 variants Standard, Nvidia, Neuron). Subnets and security
  groups are selected by the `karpenter.sh/discovery: <cluster>` tag; `capacityReservationSelectorTerms`
  select a reservation by `id` (ODCRs and Capacity Blocks, feature gate ReservedCapacity).
- concepts/nodepools.md / scheduling.md: requirement keys `node.kubernetes.io/instance-type`,
  `karpenter.sh/capacity-type` (reserved | spot | on-demand), `topology.k8s.aws/zone-id`; `limits` cap the
  resources a NodePool launches; disruption `consolidationPolicy: WhenEmpty` removes only nodes with no
  workload pods, and pods annotated `karpenter.sh/do-not-disrupt: "true"` are never disrupted voluntarily.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.config.efa_cards import pool_uses_efa
from infra.config.names import GPU_LABEL, GPU_TAINT_KEY, GPU_TAINT_VALUE, POOL_LABEL, ROLE_LABEL

if TYPE_CHECKING:
    from infra.config.platform import Platform
    from sizing.plan import Pool

NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"
DISCOVERY_TAG = "karpenter.sh/discovery"  # value: the cluster name (subnets, security group)
AMI_ALIAS = "al2023@latest"
CAPACITY_TYPE_KEY = "karpenter.sh/capacity-type"
INSTANCE_TYPE_KEY = "node.kubernetes.io/instance-type"
ZONE_ID_KEY = "topology.k8s.aws/zone-id"
SYSTEM_NODES = {ROLE_LABEL: "system"}
GPU_RESOURCE = "nvidia.com/gpu"
# the plan's size and purchase option on each NodePool, read by resource pricing (the same strings as
# sizing/cost/resources/karpenter_node_pool.py; tests/test_karpenter.py keeps them equal)
DESIRED_ANNOTATION = "llmcap.io/instances-desired"
PURCHASE_ANNOTATION = "llmcap.io/purchase"
# Karpenter capacity types per plan purchase (a pool is priced at one purchase option, so it launches only
# that one): an ODCR or a Capacity Block is `reserved` capacity (nodepools.md "reserved": the reservations
# the EC2NodeClass's capacityReservationSelectorTerms select).
CAPACITY_TYPES = {"on-demand": ["on-demand"], "spot": ["spot"], "reservation": ["reserved"],
                  "capacity-block": ["reserved"]}


def gpu_labels(pool: Pool) -> dict[str, str]:
    """The node labels a pool's managed node group carries (infra/nodegroups.gpu_labels; a test keeps them equal)."""
    return {POOL_LABEL: pool.name, GPU_LABEL: pool.gpu, ROLE_LABEL: "gpu"}


def nodeclass_name(pool: Pool) -> str:
    """One EC2NodeClass per pool (each pool's own reservation selector and root volume size)."""
    return f"llmcap-{pool.name}"


def ec2_node_class(pool: Pool, *, cluster_name: str, node_role_name: str, platform: Platform,
                   placement_group: str | None = None) -> dict[str, Any]:
    """The pool's EC2NodeClass: AL2023 (NVIDIA variant) AMI alias, the node role, subnets and security group by
    the cluster's discovery tag, IMDSv2 only with hop limit from platform.yaml, an encrypted gp3 root volume of
    the pool's root_volume_gib (as its managed node group's), and the pool's reservation when it has one."""
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": AMI_ALIAS}],
        "role": node_role_name,
        "subnetSelectorTerms": [{"tags": {DISCOVERY_TAG: cluster_name}}],
        "securityGroupSelectorTerms": [{"tags": {DISCOVERY_TAG: cluster_name}}],
        "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required",
                            "httpPutResponseHopLimit": platform.imds_hop_limit},
        "blockDeviceMappings": [{"deviceName": platform.root_device_name,
                                 "ebs": {"volumeSize": f"{pool.root_volume_gib}Gi",
                                         "volumeType": platform.root_volume_type,
                                         "encrypted": True, "deleteOnTermination": True}}],
        "tags": {"llmcap.io/pool": pool.name},
    }
    if pool.capacity_reservation_id:
        spec["capacityReservationSelectorTerms"] = [{"id": pool.capacity_reservation_id}]
    if placement_group:
        # a pool on EFA: its cluster placement group, which Karpenter resolves by name (EC2NodeClass
        # spec.placementGroupSelector, pkg/apis/v1/ec2nodeclass.go at v1.14.1: "the name or the id of the placement")
        spec["placementGroupSelector"] = {"name": placement_group}
    return {"apiVersion": NODECLASS_API, "kind": "EC2NodeClass",
            "metadata": {"name": nodeclass_name(pool)}, "spec": spec}


def nodepool_limits(pool: Pool, vcpus_per_instance: int) -> dict[str, str]:
    """What the NodePool may launch in all: the plan's instances_max nodes' GPUs and vCPUs."""
    return {GPU_RESOURCE: str(pool.instances_max * pool.gpus_per_instance),
            "cpu": str(pool.instances_max * vcpus_per_instance)}


def instances_for_replicas_max(pool: Pool) -> int:
    """Nodes the pool needs at replicas_max: whole multi-node replicas, or replicas packed per node."""
    if pool.nodes_per_replica > 1:
        return pool.replicas_max * pool.nodes_per_replica
    return -(-pool.replicas_max // max(pool.replicas_per_instance, 1))


def node_pool(pool: Pool, *, zone_ids: list[str], vcpus_per_instance: int) -> dict[str, Any]:
    """The pool's NodePool: its instance type, capacity type and zones, the GPU taint and llmcap labels of
    its managed node group (infra/aws/nodegroups.py), limits from the plan's maximum, and consolidation only
    of empty nodes."""
    if pool.purchase not in CAPACITY_TYPES:
        raise ValueError(f"pool {pool.name}: purchase {pool.purchase!r} is not one of {list(CAPACITY_TYPES)}")
    requirements = [
        {"key": INSTANCE_TYPE_KEY, "operator": "In", "values": [pool.instance_type]},
        {"key": CAPACITY_TYPE_KEY, "operator": "In", "values": CAPACITY_TYPES[pool.purchase]},
        # a pool on EFA: one zone, that of its cluster placement group ("A cluster placement group can't span
        # multiple Availability Zones", EC2 user guide placement-strategies)
        {"key": ZONE_ID_KEY, "operator": "In",
         "values": sorted(zone_ids)[:1] if pool_uses_efa(pool) else sorted(zone_ids)},
    ]
    return {
        "apiVersion": NODEPOOL_API, "kind": "NodePool",
        # the plan's size and purchase option, for resource pricing (sizing/cost/resources/karpenter_node_pool.py)
        "metadata": {"name": nodeclass_name(pool),
                     "annotations": {DESIRED_ANNOTATION: str(pool.instances_desired),
                                     PURCHASE_ANNOTATION: pool.purchase}},
        "spec": {
            "template": {
                "metadata": {"labels": gpu_labels(pool)},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                     "name": nodeclass_name(pool)},
                    "requirements": requirements,
                    "taints": [{"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": "NoSchedule"}],
                },
            },
            "limits": nodepool_limits(pool, vcpus_per_instance),
            # never replace a node to save money: only empty nodes go, after a minute without serving pods
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m"},
        },
    }


def controller_values(cluster_name: str, service_account: str, image_values: dict[str, Any] | None = None,
                      interruption_queue: str = "") -> dict[str, Any]:
    """Helm values of the Karpenter chart (charts/karpenter/values.yaml at v1.14.1): on the system nodes, the
    cluster name, the ReservedCapacity feature gate on, the service account its Pod Identity binds, and the
    controller image through the pull-through cache at its locked digest (`image_values`: the chart's
    `controller.image` repository and tag, infra/kubernetes/components/addons.py chart_image_values).
    `interruption_queue`: the SQS queue's name (infra/karpenter/interruption.py) for settings.interruptionQueue
    ("the name of the SQS queue used for processing interruption events from EC2"; "" leaves handling off)."""
    out: dict[str, Any] = {
        "settings": {"clusterName": cluster_name, "featureGates": {"reservedCapacity": True},
                     **({"interruptionQueue": interruption_queue} if interruption_queue else {})},
        "serviceAccount": {"create": True, "name": service_account},
        "nodeSelector": SYSTEM_NODES,
    }
    if image_values:
        out.update(image_values)
    return out


def karpenter_pools(provisioner: str, pools: list[Pool]) -> list[Pool]:
    """The plan pools Karpenter launches (all with provisioner karpenter, none otherwise)."""
    return list(pools) if provisioner == "karpenter" else []


KARPENTER_SERVICE_ACCOUNT = "karpenter"  # the chart's default name (serviceAccount.name), bound by Pod Identity
POLICY_FILE = Path(__file__).parent.parent / "data" / "karpenter_controller_policy.json"


def controller_policy(*, partition: str, region: str, account_id: str, cluster_name: str,
                      node_role_arn: str) -> str:
    """Karpenter's documented controller policy (infra/data/karpenter_controller_policy.json, from the v1.14
    getting-started CloudFormation template) with its CloudFormation substitutions filled for this cluster:
    instance and launch-template actions scoped to resources tagged with the cluster's name, iam:PassRole
    only for the node role, eks:DescribeCluster only for this cluster."""
    doc = json.loads(POLICY_FILE.read_text(encoding="utf-8"))
    text = json.dumps({"Version": doc["Version"], "Statement": doc["Statement"]})
    for key, value in {"${AWS::Partition}": partition, "${AWS::Region}": region, "${AWS::AccountId}": account_id,
                       "${ClusterName}": cluster_name, "${KarpenterNodeRole.Arn}": node_role_arn}.items():
        text = text.replace(key, value)
    if "${" in text:
        raise ValueError(f"{POLICY_FILE.name}: a substitution is left unfilled: {text[text.index('${'):][:40]}")
    return text
