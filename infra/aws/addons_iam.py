"""IAM for the cluster add-ons of infra/kubernetes/components/addons.py: the Cluster Autoscaler's least-privilege
policy and its
EKS Pod Identity role. (The AWS Load Balancer Controller's role lives with the cluster, infra/aws/cluster.py.)

The policy follows the Cluster Autoscaler AWS README (kubernetes/autoscaler
cluster-autoscaler/cloudprovider/aws/README.md, "Full Cluster Autoscaler Features Policy"): read-only
describe calls on `*`, and the two mutating calls only on Auto Scaling groups tagged as this cluster's
(`k8s.io/cluster-autoscaler/<cluster>` = owned, which EKS puts on every managed node group's group)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from infra.aws.iam import pod_identity_trust_policy
from infra.config.names import CLUSTER_AUTOSCALER_NAMESPACE, CLUSTER_AUTOSCALER_SERVICE_ACCOUNT

AUTOSCALER_DESCRIBE_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "autoscaling:DescribeTags",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
    "eks:DescribeNodegroup",  # labels/taints/resources of a managed node group at zero nodes
)
AUTOSCALER_SCALE_ACTIONS = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")
AUTOSCALER_ENABLED_TAG = "k8s.io/cluster-autoscaler/enabled"


def autoscaler_owner_tag(cluster_name: str) -> str:
    """The Auto Scaling group tag that marks a group as this cluster's (value `owned`)."""
    return f"k8s.io/cluster-autoscaler/{cluster_name}"


def cluster_autoscaler_policy(cluster_name: str) -> str:
    doc: dict[str, Any] = {"Version": "2012-10-17", "Statement": [
        {"Sid": "DescribeNodeGroups", "Effect": "Allow", "Action": list(AUTOSCALER_DESCRIBE_ACTIONS),
         "Resource": "*"},
        {"Sid": "ScaleThisClustersGroups", "Effect": "Allow", "Action": list(AUTOSCALER_SCALE_ACTIONS),
         "Resource": "*",
         "Condition": {"StringEquals": {f"aws:ResourceTag/{autoscaler_owner_tag(cluster_name)}": "owned",
                                        f"aws:ResourceTag/{AUTOSCALER_ENABLED_TAG}": "true"}}},
    ]}
    return json.dumps(doc)


@dataclass
class PodIdentity:
    role: aws.iam.Role
    association: aws.eks.PodIdentityAssociation


def cluster_autoscaler_identity(name: str, cluster_name: pulumi.Input[str], cluster_arn: pulumi.Input[str],
                                tags: dict[str, str], parent: pulumi.Resource | None = None) -> PodIdentity:
    """The Cluster Autoscaler's role (inline least-privilege policy) bound to its service account."""
    role = aws.iam.Role(f"{name}-cluster-autoscaler", assume_role_policy=pod_identity_trust_policy(
                            cluster_arn, CLUSTER_AUTOSCALER_NAMESPACE, CLUSTER_AUTOSCALER_SERVICE_ACCOUNT),
                        description="Cluster Autoscaler through EKS Pod Identity", tags=tags,
                        opts=pulumi.ResourceOptions(parent=parent))
    aws.iam.RolePolicy(f"{name}-cluster-autoscaler", role=role.id,
                       policy=pulumi.Output.from_input(cluster_name).apply(cluster_autoscaler_policy),
                       opts=pulumi.ResourceOptions(parent=role))
    association = aws.eks.PodIdentityAssociation(
        f"{name}-cluster-autoscaler", cluster_name=cluster_name, namespace=CLUSTER_AUTOSCALER_NAMESPACE,
        service_account=CLUSTER_AUTOSCALER_SERVICE_ACCOUNT, role_arn=role.arn, tags=tags,
        opts=pulumi.ResourceOptions(parent=parent))
    return PodIdentity(role, association)
