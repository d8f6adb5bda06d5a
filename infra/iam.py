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


def pod_identity_trust_policy() -> str:
    """EKS Pod Identity: the agent assumes the role and tags the session with the pod's identity."""
    return service_trust_policy(POD_IDENTITY_PRINCIPAL, ("sts:AssumeRole", "sts:TagSession"))


def role_with_managed_policies(name: str, trust_policy: str, policies: list[str], tags: dict[str, str],
                               parent: pulumi.Resource, description: str) -> aws.iam.Role:
    role = aws.iam.Role(name, assume_role_policy=trust_policy, description=description, tags=tags,
                        opts=pulumi.ResourceOptions(parent=parent))
    for p in policies:
        aws.iam.RolePolicyAttachment(f"{name}-{p}", role=role.name, policy_arn=managed_policy_arn(p),
                                     opts=pulumi.ResourceOptions(parent=role))
    return role
