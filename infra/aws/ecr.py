"""The ECR pull-through cache the cluster pulls through (issue 14 item 9): one rule per upstream the
images need (infra/config/registry.py, infra/data/registries.yaml), the Docker Hub rule only with the user's
Secrets Manager credential, and the node role's right to fill the cache (ecr:BatchImportUpstreamImage,
ecr:CreateRepository on the cache prefixes' repositories). Nothing when the user names a registry."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
import pulumi_aws as aws

from infra.aws.iam import partition
from infra.config import settings
from infra.config.names import COMPONENT_PREFIX
from infra.config.registry import cache_host, prefix

if TYPE_CHECKING:
    from sizing.deployment import DeploymentOptions

CACHE_FILL_ACTIONS = ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"]


def cache_fill_policy(part: str, region: str, account_id: str, prefixes: list[str]) -> str:
    """What the node role needs beyond pulling to use the cache (registries.yaml `permissions`)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "FillPullThroughCache", "Effect": "Allow", "Action": CACHE_FILL_ACTIONS,
        "Resource": [f"arn:{part}:ecr:{region}:{account_id}:repository/{p}/*" for p in prefixes]}]})


def cache_upstreams(upstreams: list[str], deployment: DeploymentOptions) -> list[str]:
    """The upstreams to create rules for: those the images need; Docker Hub only with a credential."""
    ups = settings.registries()["upstreams"]
    return [u for u in sorted(set(upstreams))
            if not ups[u]["credential"] or (u == "docker.io" and deployment.docker_hub_credential_arn)]


@dataclass
class PullThroughCacheArgs:
    region: str
    deployment: DeploymentOptions
    upstreams: list[str]  # upstream hosts of every image pulled through the cache
    node_role_name: pulumi.Input[str]


class PullThroughCache(pulumi.ComponentResource):
    registry_host: pulumi.Output[str]
    rules: list[aws.ecr.PullThroughCacheRule]

    def __init__(self, name: str, args: PullThroughCacheArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{COMPONENT_PREFIX}PullThroughCache", name, None, opts)
        d = args.deployment
        account = aws.get_caller_identity_output().account_id
        self.rules = []
        if d.image_registry:
            self.registry_host = pulumi.Output.from_input(d.image_registry.rstrip("/"))
        else:
            self.registry_host = account.apply(lambda a: cache_host(a, args.region))
            ups = settings.registries()["upstreams"]
            chosen = cache_upstreams(args.upstreams, d)
            for u in chosen:
                self.rules.append(aws.ecr.PullThroughCacheRule(
                    f"{name}-ptc-{ups[u]['prefix']}", ecr_repository_prefix=ups[u]["prefix"],
                    upstream_registry_url=ups[u]["upstream_registry_url"],
                    credential_arn=d.docker_hub_credential_arn if ups[u]["credential"] else None,
                    opts=pulumi.ResourceOptions(parent=self)))
            prefixes = [prefix(u) for u in chosen]
            aws.iam.RolePolicy(f"{name}-node-pull-through-cache", role=args.node_role_name,
                               policy=pulumi.Output.all(partition(), account).apply(
                                   lambda a: cache_fill_policy(a[0], args.region, a[1], prefixes)),
                               opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"registryHost": self.registry_host})
