"""Deployment options (stack config key `llmcap:deployment`): how infra/ stands the plan up.

Pure data read once at the edge; infra/ components receive them as typed args. Each default is
stated once: here, or (where it is a platform figure the cost model also prices, such as the
system node type) in sizing/data/platform.csv, with `None` here meaning "that default".
Secure defaults: a private EKS API endpoint, an internal inference endpoint, and a public one
only with TLS.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sizing.spec import no_control_chars

# Secrets Manager secret for an ECR pull-through cache rule: the name "begins with ecr-pullthroughcache/"
# (ECR CreatePullThroughCacheRule credentialArn pattern, docs.aws.amazon.com/AmazonECR/latest/APIReference)
_PTC_SECRET_ARN = re.compile(
    r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:ecr-pullthroughcache/[\w/+=.@-]+$")
_ACM_ARN = re.compile(r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[\w-]+$")
_REGISTRY = re.compile(r"^[a-z0-9.-]+(:\d+)?(/[a-z0-9._-]+)*$")
_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")


def _cidr(v: str) -> str:
    try:
        return str(ipaddress.ip_network(v, strict=True))
    except ValueError as e:
        raise ValueError(f"{v!r} is not a CIDR block such as 203.0.113.0/24 ({e})") from None


PROVISIONERS = ("managed-node-groups", "karpenter")


class DeploymentOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    provisioner: Literal["managed-node-groups", "karpenter"] = Field(
        default="managed-node-groups",
        description="what launches the GPU nodes: EKS managed node groups scaled by the Cluster Autoscaler, or "
                    "Karpenter (one EC2NodeClass and one NodePool per plan pool, infra/karpenter/nodes.py)")
    _plain_text = field_validator("*", mode="before")(no_control_chars)

    vpc_id: str | None = Field(default=None, description="bring your own VPC (with the subnet ids below)")
    private_subnet_ids: list[str] | None = Field(
        default=None, description="bring-your-own private subnets (at least two AZs) for the cluster and nodes")
    public_subnet_ids: list[str] | None = Field(
        default=None, description="bring-your-own public subnets for an internet-facing load balancer")
    vpc_cidr: str = Field(default="10.40.0.0/16", description="CIDR of the VPC llmcap creates (/16 to /20)")
    nat_gateways: int | None = Field(
        default=None, ge=1, le=6,
        description="cap on the NAT gateways of the VPC llmcap creates; default one per AZ (platform.csv)")
    cluster_endpoint_public_access_cidrs: list[str] = Field(
        default_factory=list,
        description="CIDRs allowed to reach the EKS API publicly (the address `pulumi up` runs from, e.g. "
                    "your egress /32 or your CI's range); the private endpoint stays on for the nodes")
    cluster_endpoint_private_only: bool = Field(
        default=False,
        description="no public EKS API: Pulumi runs where the private endpoint is reachable (inside the VPC "
                    "you bring with vpc_id, over VPN, Direct Connect or peering)")
    cluster_endpoint_allow_open: bool = Field(
        default=False, description="allow 0.0.0.0/0 in cluster_endpoint_public_access_cidrs (on purpose)")
    kubernetes_version: str | None = Field(
        default=None, pattern=r"^1\.\d{2}$",
        description="EKS Kubernetes version; default the pinned version in infra/data/platform.yaml")
    admin_principal_arns: list[str] = Field(
        default_factory=list,
        description="IAM role/user ARNs given cluster-admin access entries (the creator gets admin too)")
    system_node_instance_type: str | None = Field(
        default=None, description="CPU system node type; default system_node_instance_type in platform.csv")
    system_node_count: int | None = Field(
        default=None, ge=1, le=20,
        description="CPU system nodes; default sized from the plan (sizing/planning/system_nodes.py), at least "
                    "system_node_count in platform.csv")
    model_cache_on_instance_store: bool = Field(
        default=True, description="put containerd and the model cache on the instance-store NVMe (RAID0) "
                                  "where the instance type has one")
    weights_bucket_force_destroy: bool = Field(
        default=False, description="let `pulumi destroy` delete the weights bucket while it holds objects")
    docker_hub_credential_arn: str | None = Field(
        default=None,
        description="Secrets Manager secret (name ecr-pullthroughcache/...) with a Docker Hub username and "
                    "access token, for the ECR pull-through cache rule that serves the vLLM and router images")
    image_registry: str | None = Field(
        default=None,
        description="a registry you run that mirrors the upstreams as <registry>/<prefix>/<path> (prefixes "
                    "docker-hub, ecr-public, k8s, quay, as ECR pull-through caches name them); llmcap then "
                    "creates no cache rules")
    allow_unpinned_images: bool = Field(
        default=False,
        description="deploy images by tag where the image lock (stacks/images.lock.json, written by "
                    "`llmcap images lock STACK`) has no digest for them; render and the plan's fit table say "
                    "which. Without it, render and pulumi up stop until the lock exists")
    allow_nccl_sockets: bool = Field(
        default=False,
        description="deploy a multi-node pool on EFA although its engine image has no aws-ofi-nccl (sizing/data/"
                    "nccl_net_plugins.csv), so NCCL runs over TCP sockets on one network card; the plan prices and "
                    "sizes it at that bandwidth. Without it the fit check refuses such a pool")
    public_endpoint: bool = Field(default=False, description="expose the router on an internet-facing NLB")
    tls_certificate_arn: str | None = Field(
        default=None, description="ACM certificate: TLS on the endpoint's NLB (443), internal or public; "
                                  "required with public_endpoint. Without it the deployment creates one (a CA of "
                                  "its own; stack output endpointCaCertificate) unless allow_plain_http_endpoint")
    allow_plain_http_endpoint: bool = Field(
        default=False,
        description="serve the internal endpoint over plain HTTP (port 80) without a certificate: the API key "
                    "then crosses the VPC in clear text. Without it the endpoint serves TLS only, with "
                    "tls_certificate_arn or a certificate the deployment creates")
    endpoint_allowed_cidrs: list[str] = Field(default_factory=list,
                                              description="CIDRs allowed to reach a public endpoint")

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_cidr(cls, v: str) -> str:
        net = ipaddress.ip_network(_cidr(v))
        if net.version != 4 or not 16 <= net.prefixlen <= 20:
            raise ValueError(f"{v!r}: use an IPv4 block from /16 to /20 (pods take VPC addresses)")
        return str(net)

    @field_validator("cluster_endpoint_public_access_cidrs", "endpoint_allowed_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        return [_cidr(c) for c in v]

    @field_validator("tls_certificate_arn")
    @classmethod
    def _acm(cls, v: str | None) -> str | None:
        if v is not None and not _ACM_ARN.match(v):
            raise ValueError(f"{v!r} is not an ACM certificate ARN (arn:aws:acm:REGION:ACCOUNT:certificate/ID)")
        return v

    @field_validator("docker_hub_credential_arn")
    @classmethod
    def _ptc_secret(cls, v: str | None) -> str | None:
        if v is not None and not _PTC_SECRET_ARN.match(v):
            raise ValueError(f"{v!r} is not a Secrets Manager secret ARN whose name starts with ecr-pullthroughcache/ "
                             "(arn:aws:secretsmanager:REGION:ACCOUNT:secret:ecr-pullthroughcache/NAME)")
        return v

    @field_validator("image_registry")
    @classmethod
    def _registry(cls, v: str | None) -> str | None:
        if v is not None and not _REGISTRY.match(v.rstrip("/")):
            raise ValueError(f"{v!r} is not a registry host with an optional path (e.g. "
                             "123456789012.dkr.ecr.us-east-1.amazonaws.com/mirror), without a scheme")
        return v

    @field_validator("admin_principal_arns")
    @classmethod
    def _arns(cls, v: list[str]) -> list[str]:
        for a in v:
            if not _ARN.match(a):
                raise ValueError(f"{a!r} is not an IAM role or user ARN (arn:aws:iam::123456789012:role/NAME)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> DeploymentOptions:
        open_cidrs = [c for c in self.cluster_endpoint_public_access_cidrs if ipaddress.ip_network(c).prefixlen == 0]
        if open_cidrs and not self.cluster_endpoint_allow_open:
            raise ValueError(f"cluster_endpoint_public_access_cidrs: {open_cidrs[0]} opens the EKS API to the whole "
                             "internet; list the address Pulumi runs from, or set cluster_endpoint_allow_open: true")
        if self.allow_plain_http_endpoint and self.tls_certificate_arn:
            raise ValueError("allow_plain_http_endpoint: true contradicts tls_certificate_arn (the endpoint serves "
                             "TLS with it); keep one of them")
        if self.cluster_endpoint_private_only and self.cluster_endpoint_public_access_cidrs:
            raise ValueError("cluster_endpoint_private_only: true contradicts cluster_endpoint_public_access_cidrs; "
                             "keep one of them")
        if self.public_endpoint and not self.tls_certificate_arn:
            raise ValueError("public_endpoint: true needs tls_certificate_arn (an ACM certificate ARN)")
        if self.public_endpoint and not self.endpoint_allowed_cidrs:
            raise ValueError("public_endpoint: true needs endpoint_allowed_cidrs (the clients' CIDRs; "
                             "0.0.0.0/0 opens it to everyone, on purpose)")
        if self.vpc_id and not self.private_subnet_ids:
            raise ValueError("vpc_id needs private_subnet_ids (at least two, in different AZs)")
        if self.vpc_id and self.private_subnet_ids is not None and len(self.private_subnet_ids) < 2:
            raise ValueError("private_subnet_ids: EKS needs subnets in at least two AZs; list at least two")
        if not self.vpc_id and (self.private_subnet_ids or self.public_subnet_ids):
            raise ValueError("private_subnet_ids/public_subnet_ids need vpc_id (the VPC they belong to)")
        if self.public_endpoint and self.vpc_id and not self.public_subnet_ids:
            raise ValueError("public_endpoint with your own VPC needs public_subnet_ids for the load balancer")
        return self
