"""Platform rules of the deployability check (infra/fit.py), issue 14 items 6, 9 and 10:

- `endpoint-unreachable`: the machine running `pulumi up` can reach the EKS API it creates;
- `image-source`: every image comes through the ECR pull-through cache or the user's registry, pinned;
- `version-unsupported`: every pinned component supports the cluster's Kubernetes minor.

Pure (no pulumi import). The rules and their sources are rows of infra/data/fit_platform.yaml and
infra/data/versions.yaml."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

import yaml

from infra.fit import FitContext, FitProblem, fit_rule
from infra import settings
from infra.settings import DATA_DIR

CIDR_COMMAND = ("pulumi config set --path 'llmcap:deployment.cluster_endpoint_public_access_cidrs[0]' "
                "\"$(curl -s https://checkip.amazonaws.com)/32\"")


@cache
def rules_data() -> dict[str, Any]:
    doc = yaml.safe_load((DATA_DIR / "fit_platform.yaml").read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{DATA_DIR / 'fit_platform.yaml'}: expected a mapping")
    return doc


def _source(key: str) -> str:
    return str(rules_data()[key]["source"])


@fit_rule("endpoint-unreachable")
def endpoint_unreachable(ctx: FitContext) -> Iterator[FitProblem]:
    """The EKS API must be reachable from where the program runs. Without public CIDRs it is reachable
    only inside the VPC; a VPC created by this run has nothing of the user's inside it. The "no CIDRs
    at all" case needs the real run (`extra["deploying"]`): an offline render reaches no API."""
    d = ctx.stack.deployment
    src = _source("endpoint_unreachable")
    if d.cluster_endpoint_private_only and not d.vpc_id:
        yield FitProblem("endpoint-unreachable", "llmcap:deployment",
                         "cluster_endpoint_private_only: true, but the VPC is created by this run, so nothing "
                         "that runs Pulumi is inside it; set vpc_id (a VPC you reach over VPN/peering) or "
                         "give cluster_endpoint_public_access_cidrs instead", src)
    elif (ctx.extra.get("deploying") and not d.cluster_endpoint_private_only
          and not d.cluster_endpoint_public_access_cidrs):
        yield FitProblem("endpoint-unreachable", "llmcap:deployment",
                         "the EKS API would be private-only and this machine could not create the Kubernetes "
                         f"objects; allow your address with `{CIDR_COMMAND}`, or set "
                         "cluster_endpoint_private_only: true when Pulumi runs inside the VPC you bring (vpc_id)",
                         src)


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


@fit_rule("version-unsupported")
def version_unsupported(ctx: FitContext) -> Iterator[FitProblem]:
    """Every pinned component supports the cluster's Kubernetes minor (infra/data/versions.yaml
    `compatibility`); the Cluster Autoscaler's minor must equal it."""
    from infra.platform import load_platform

    k8s = load_platform(ctx.stack.deployment).kubernetes_version
    for key, row in settings.compatibility().items():
        low, high = row.kubernetes_min, row.kubernetes_max
        if _minor(k8s) < _minor(low) or (high is not None and _minor(k8s) > _minor(high)):
            span = f"{low}-{high}" if high else f">= {low}"
            yield FitProblem("version-unsupported", key,
                             f"{key} {row.version} supports Kubernetes {span}, the cluster is {k8s}; pin a "
                             f"{key} version for {k8s} in infra/data/versions.yaml or change "
                             "llmcap:deployment.kubernetes_version", row.source)
