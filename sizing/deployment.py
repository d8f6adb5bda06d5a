"""Deployment options (stack config key `llmcap:deployment`): how infra/ stands the plan up.

Pure data read once at the edge; infra/ components receive them as typed args.
Secure defaults: the inference endpoint is internal, and a public one requires TLS.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class DeploymentOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    vpc_id: str | None = Field(default=None, description="bring your own VPC (with the subnet ids below)")
    private_subnet_ids: list[str] | None = None
    public_subnet_ids: list[str] | None = None
    vpc_cidr: str = Field(default="10.40.0.0/16", description="CIDR of the VPC llmcap creates")
    cluster_endpoint_public_access_cidrs: list[str] = Field(
        default_factory=list,
        description="CIDRs allowed to reach the EKS API publicly; empty = private API endpoint only")
    public_endpoint: bool = Field(default=False, description="expose the router on an internet-facing NLB")
    tls_certificate_arn: str | None = Field(default=None, description="ACM certificate for the public endpoint")
    endpoint_allowed_cidrs: list[str] = Field(default_factory=list,
                                              description="CIDRs allowed to reach a public endpoint")

    @model_validator(mode="after")
    def _public_needs_tls(self) -> DeploymentOptions:
        if self.public_endpoint and not self.tls_certificate_arn:
            raise ValueError("public_endpoint: true needs tls_certificate_arn (an ACM certificate ARN)")
        if self.vpc_id and not self.private_subnet_ids:
            raise ValueError("vpc_id needs private_subnet_ids (at least two, in different AZs)")
        return self
