"""Platform rules of the deployability check (infra/fit/check.py), issue 14 items 6, 9 and 10:

- `endpoint-unreachable`: the machine running `pulumi up` can reach the EKS API it creates;
- `image-source`: every image comes through the ECR pull-through cache or the user's registry, pinned;
- `version-unsupported`: every pinned component supports the cluster's Kubernetes minor;
- `service-cidr-overlap`: the pinned Service range is private and outside the VPC llmcap creates.

Pure (no pulumi import). The rules and their sources are rows of infra/data/fit_platform.yaml and
infra/data/versions.yaml."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from functools import cache
from typing import Any

import yaml

from infra.config import settings
from infra.config.platform import load_platform
from infra.config.settings import DATA_DIR
from infra.fit.check import FitContext, FitProblem, fit_row, fit_rule

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


PRIVATE_BLOCKS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")  # quoted in fit_platform.yaml service_cidr_overlap


@fit_rule("service-cidr-overlap")
def service_cidr_overlap(ctx: FitContext) -> Iterator[FitProblem]:
    """The pinned Service range is private and does not overlap the VPC llmcap creates: EKS refuses the
    cluster otherwise, after the VPC and its NAT gateways were created."""
    service = ipaddress.ip_network(load_platform().service_ipv4_cidr)
    src = _source("service_cidr_overlap")
    if not any(service.subnet_of(ipaddress.ip_network(b)) for b in PRIVATE_BLOCKS):  # type: ignore[arg-type]
        yield FitProblem("service-cidr-overlap", "infra/data/platform.yaml",
                         f"service_ipv4_cidr {service} is not inside {', '.join(PRIVATE_BLOCKS)}", src)
    d = ctx.stack.deployment
    if not d.vpc_id and service.overlaps(ipaddress.ip_network(d.vpc_cidr)):
        yield FitProblem("service-cidr-overlap", "llmcap:deployment.vpc_cidr",
                         f"vpc_cidr {d.vpc_cidr} overlaps the cluster's Service range {service} "
                         "(infra/data/platform.yaml service_ipv4_cidr); choose a vpc_cidr outside it", src)


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


@fit_rule("version-unsupported")
def version_unsupported(ctx: FitContext) -> Iterator[FitProblem]:
    """Every pinned component supports the cluster's Kubernetes minor (infra/data/versions.yaml
    `compatibility`); the Cluster Autoscaler's minor must equal it."""
    from infra.config.platform import load_platform

    k8s = load_platform(ctx.stack.deployment).kubernetes_version
    for key, row in settings.compatibility().items():
        low, high = row.kubernetes_min, row.kubernetes_max
        if _minor(k8s) < _minor(low) or (high is not None and _minor(k8s) > _minor(high)):
            span = (f"only {low}" if low == high else f"{low}-{high}") if high else f">= {low}"
            yield FitProblem("version-unsupported", key,
                             f"{key} {row.version} supports Kubernetes {span}, the cluster is {k8s}; pin a "
                             f"{key} version for {k8s} in infra/data/versions.yaml or change "
                             "llmcap:deployment.kubernetes_version", row.source)


MUTABLE_TAGS = ("latest", "main", "nightly", "")


@fit_rule("image-source")
def image_source(ctx: FitContext) -> Iterator[FitProblem]:
    """Every image through the cache or the user's registry, and pinned. Whether the Docker Hub credential
    exists is a fact of the user's account, so the missing-credential case needs the real run."""
    from infra.config.registry import CLUSTER_IMAGES
    from infra.kubernetes.engines import images_in_use

    d = ctx.stack.deployment
    src = _source("image_source")
    used = images_in_use(ctx.plan, CLUSTER_IMAGES)
    for key in used:
        img = settings.image(key)
        if img.tag in MUTABLE_TAGS and not img.digest:
            yield FitProblem("image-source", key, f"{img.image}:{img.tag or '(no tag)'} is not pinned; pin a "
                             "release tag in infra/data/versions.yaml and run llmcap images lock", src)
    hub = sorted(settings.image(k).image for k in used if settings.image(k).registry == "docker.io")
    if ctx.extra.get("deploying") and hub and not (d.image_registry or d.docker_hub_credential_arn):
        limit = settings.registries()["docker_hub_anonymous_pulls_per_hour"]
        yield FitProblem("image-source", "llmcap:deployment",
                         f"{', '.join(hub)} come from Docker Hub ({limit} anonymous pulls per hour per IP); store a "
                         "Docker Hub access token in Secrets Manager as ecr-pullthroughcache/docker-hub and set "
                         "docker_hub_credential_arn to its ARN, or name your mirror in image_registry", src)


@fit_row
def image_pins(ctx: FitContext) -> dict[str, dict[str, object]]:
    """Fit-table column: how the images are pinned (infra/config/image_lock.py): by the lock's digests, or by
    tag under llmcap:deployment.allow_unpinned_images (which, if any)."""
    pins = ctx.extra.get("image_pins")
    if pins is None:  # a caller that read no lock (the fit check alone)
        note = "not checked (no image lock read)"
    elif pins.unpinned:
        note = f"by tag (allow_unpinned_images): {', '.join(pins.unpinned)}; llmcap images lock pins them"
    else:
        note = f"by digest ({pins.lock_file})"
    return {pool.name: {"image pins": note} for pool in ctx.plan.pools}
