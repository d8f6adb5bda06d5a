"""Weights storage: a private S3 bucket (public access blocked, owner-enforced, encrypted,
versioned, TLS-only), and EKS Pod Identity roles: read-only on the model prefix for the serving
pods, read-write on it for the one-off job that copies weights from the Hugging Face hub.

Shared file systems (FSx for Lustre, EFS) are not created: the plan loads weights from S3
(or the node's NVMe cache) and has no field asking for shared storage."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pulumi
import pulumi_aws as aws

from infra.aws.iam import pod_identity_trust_policy
from infra.config.names import COMPONENT_PREFIX

if TYPE_CHECKING:
    from infra.config.platform import Platform

READ_ACTIONS = ["s3:GetObject"]
WRITE_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"]


def tls_only_policy(bucket_arn: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
        "Resource": [bucket_arn, f"{bucket_arn}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]})


def prefix_access_policy(bucket_arn: str, prefix: str | list[str], object_actions: list[str]) -> str:
    """Object actions on `prefix*` only (each prefix of a list), and listing limited to those prefixes."""
    prefixes = [prefix] if isinstance(prefix, str) else list(prefix)
    objects: str | list[str] = f"{bucket_arn}/{prefixes[0]}*" if len(prefixes) == 1 else \
        [f"{bucket_arn}/{p}*" for p in prefixes]
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "ModelObjects", "Effect": "Allow", "Action": object_actions, "Resource": objects},
        {"Sid": "ListModelPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [x for p in prefixes for x in (p, f"{p}*")]}}}]})


def _access_policy(prefixes: list[str], object_actions: list[str]) -> Callable[[str], str]:
    return lambda bucket_arn: prefix_access_policy(bucket_arn, prefixes, object_actions)


@dataclass
class PodAccess:
    """A pod identity role for one service account with the given object actions on the prefix."""

    service_account: str
    object_actions: list[str]
    description: str


@dataclass
class WeightsStoreArgs:
    cluster_name: pulumi.Input[str]
    cluster_arn: pulumi.Input[str]
    namespace: str
    prefixes: list[str]  # one per checkpoint the plan serves
    platform: Platform
    access: list[PodAccess]
    force_destroy: bool = False
    tags: dict[str, str] = field(default_factory=dict)


class WeightsStore(pulumi.ComponentResource):
    bucket: aws.s3.Bucket
    roles: dict[str, aws.iam.Role]

    def __init__(self, name: str, args: WeightsStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{COMPONENT_PREFIX}WeightsStore", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = args.tags
        self.bucket = aws.s3.Bucket(f"{name}-weights", force_destroy=args.force_destroy, tags=tags, opts=child)
        bucket_child = pulumi.ResourceOptions(parent=self.bucket)
        aws.s3.BucketOwnershipControls(f"{name}-weights", bucket=self.bucket.id,
                                       rule={"object_ownership": "BucketOwnerEnforced"}, opts=bucket_child)
        pab = aws.s3.BucketPublicAccessBlock(f"{name}-weights", bucket=self.bucket.id, block_public_acls=True,
                                             block_public_policy=True, ignore_public_acls=True,
                                             restrict_public_buckets=True, opts=bucket_child)
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-weights", bucket=self.bucket.id,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}}], opts=bucket_child)
        versioning = aws.s3.BucketVersioning(f"{name}-weights", bucket=self.bucket.id,
                                             versioning_configuration={"status": "Enabled"}, opts=bucket_child)
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-weights", bucket=self.bucket.id,
            rules=[{"id": "expire-noncurrent-and-abandoned-uploads", "status": "Enabled", "filter": {"prefix": ""},
                    "noncurrent_version_expiration": {"noncurrent_days": args.platform.weights_noncurrent_version_days},
                    "abort_incomplete_multipart_upload": {
                        "days_after_initiation": args.platform.abort_incomplete_multipart_days}}],
            opts=pulumi.ResourceOptions(parent=self.bucket, depends_on=[versioning]))
        aws.s3.BucketPolicy(f"{name}-weights-tls-only", bucket=self.bucket.id,
                            policy=self.bucket.arn.apply(tls_only_policy),
                            opts=pulumi.ResourceOptions(parent=self.bucket, depends_on=[pab]))

        self.roles = {}
        for acc in args.access:
            role = aws.iam.Role(f"{name}-{acc.service_account}", assume_role_policy=pod_identity_trust_policy(
                                    args.cluster_arn, args.namespace, acc.service_account),
                                description=acc.description, tags=tags, opts=child)
            aws.iam.RolePolicy(f"{name}-{acc.service_account}", role=role.id,
                               policy=self.bucket.arn.apply(_access_policy(args.prefixes, acc.object_actions)),
                               opts=pulumi.ResourceOptions(parent=role))
            aws.eks.PodIdentityAssociation(f"{name}-{acc.service_account}", cluster_name=args.cluster_name,
                                           namespace=args.namespace, service_account=acc.service_account,
                                           role_arn=role.arn, tags=tags, opts=child)
            self.roles[acc.service_account] = role
        self.register_outputs({"bucket": self.bucket.bucket, "prefixes": args.prefixes})
