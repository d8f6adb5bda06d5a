"""IAM helpers shared by the components: trust policies and managed-policy ARNs per partition."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"


def partition() -> pulumi.Output[str]:
    """`aws`, `aws-cn` or `aws-us-gov`, so managed-policy ARNs work outside the commercial partition."""
    return aws.get_partition_output().partition


def managed_policy_arn(name: str) -> pulumi.Output[str]:
    return partition().apply(lambda p: f"arn:{p}:iam::aws:policy/{name}")


def service_trust_policy(service: str, actions: tuple[str, ...] = ("sts:AssumeRole",)) -> str:
    doc: dict[str, Any] = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": service}, "Action": list(actions)}]}
    return json.dumps(doc)


def pod_identity_trust_document(account_id: str, cluster_arn: str, namespace: str, service_account: str) -> str:
    """EKS Pod Identity: the agent assumes the role and tags the session with the pod's identity.

    Conditions (EKS user guide "Create IAM role with trust policy required by EKS Pod Identity":
    "You can use these tags in the condition keys in the trust policy to restrict which service
    accounts, namespaces, and clusters can use this role"; the session tags are listed in
    "Enable or disable session tags", pod-id-abac): aws:SourceAccount (IAM global condition key,
    confused-deputy prevention) and the eks-cluster-arn, kubernetes-namespace and
    kubernetes-service-account request tags, so only this cluster's one service account can use it.
    aws:SourceArn is not used: the Pod Identity pages do not document what EKS sets it to; the
    cluster ARN is pinned through the documented eks-cluster-arn session tag instead."""
    doc: dict[str, Any] = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {"StringEquals": {
            "aws:SourceAccount": account_id, "aws:RequestTag/eks-cluster-arn": cluster_arn,
            "aws:RequestTag/kubernetes-namespace": namespace,
            "aws:RequestTag/kubernetes-service-account": service_account}}}]}
    return json.dumps(doc)


def pod_identity_trust_policy(cluster_arn: pulumi.Input[str], namespace: str, service_account: str
                              ) -> pulumi.Output[str]:
    """The trust policy of a role used by one service account of one cluster (this account)."""
    account = aws.get_caller_identity_output().account_id
    return pulumi.Output.all(account, cluster_arn).apply(
        lambda a: pod_identity_trust_document(a[0], a[1], namespace, service_account))


def role_with_managed_policies(name: str, trust_policy: pulumi.Input[str], policies: list[str], tags: dict[str, str],
                               parent: pulumi.Resource, description: str) -> aws.iam.Role:
    role = aws.iam.Role(name, assume_role_policy=trust_policy, description=description, tags=tags,
                        opts=pulumi.ResourceOptions(parent=parent))
    for p in policies:
        aws.iam.RolePolicyAttachment(f"{name}-{p}", role=role.name, policy_arn=managed_policy_arn(p),
                                     opts=pulumi.ResourceOptions(parent=role))
    return role
