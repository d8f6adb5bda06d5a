"""Where the cluster pulls the images llmcap sets (issue 14 item 9): through the ECR pull-through cache
in the stack's account and region (`<account>.dkr.ecr.<region>.amazonaws.com/<prefix>/<path>`), or from
the registry the user names in `llmcap:deployment.image_registry`, laid out the same way. Docker Hub
caps anonymous pulls per IP, so Docker Hub images go through a cache rule with a Secrets Manager
credential (`docker_hub_credential_arn`) or through the user's registry. Pure: no pulumi import.
Upstreams, prefixes and sources: infra/data/registries.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.config import settings

if TYPE_CHECKING:
    from infra.config.image_lock import ImagePins
    from sizing.deployment import DeploymentOptions

# the images llmcap sets in its own manifests (chart images are set per chart, infra/kubernetes/components/addons.py)
CLUSTER_IMAGES = ("vllm", "router", "aws_cli", "sglang")


def cache_host(account_id: str, region: str) -> str:
    """The private registry of the account, where pull-through cache repositories live."""
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account_id}.dkr.ecr.{region}.{suffix}"


def prefix(upstream: str) -> str:
    ups = settings.registries()["upstreams"]
    if upstream not in ups:
        raise ValueError(f"no pull-through cache upstream for {upstream!r}; known: {sorted(ups)}")
    return str(ups[upstream]["prefix"])


def pulled(image: settings.Image, host: str) -> str:
    """The reference a node pulls: `<host>/<prefix of the upstream>/<path>:<tag>[@digest]`."""
    return f"{host}/{prefix(image.registry)}/{image.image}{image.pin}"


def api_location(image: settings.Image, image_registry: str | None) -> tuple[str, str]:
    """(registry host, repository name) to ask the registry API for `image`'s manifests: the user's
    registry laid out as `<registry>/<prefix>/<path>`, or the upstream's API host (registries.yaml
    `upstream_registry_url`: Docker Hub's API is registry-1.docker.io)."""
    if image_registry:
        host, _, path = image_registry.rstrip("/").partition("/")
        return host, "/".join(p for p in (path, prefix(image.registry), image.image) if p)
    return str(settings.registries()["upstreams"][image.registry]["upstream_registry_url"]), image.image


def registry_host(deployment: DeploymentOptions, account_id: str, region: str) -> str:
    return deployment.image_registry.rstrip("/") if deployment.image_registry else cache_host(account_id, region)


def upstreams_needed(keys: tuple[str, ...] = CLUSTER_IMAGES) -> list[str]:
    return sorted({settings.image(k).registry for k in keys})


@dataclass(frozen=True)
class ImageRefs:
    """The image references of llmcap's own containers."""

    vllm: str
    router: str
    aws_cli: str
    sglang: str

    @staticmethod
    def through(host: str, pins: ImagePins) -> ImageRefs:
        """Through the cache at `host`, each with its locked digest (`:<tag>@sha256:...`) where the image
        lock has one (infra/config/image_lock.py)."""
        return ImageRefs(**{k: pulled(pins.image(k), host) for k in CLUSTER_IMAGES})

    @staticmethod
    def upstream() -> ImageRefs:
        """Straight from the upstream registries: only for unit tests of the builders and the compose
        target (one server, a handful of pulls); the cluster always uses `through`."""
        return ImageRefs(**{k: settings.image(k).ref for k in CLUSTER_IMAGES})
