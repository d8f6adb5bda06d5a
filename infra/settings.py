"""Typed access to the Kubernetes side's data files (no pulumi import): pinned images and charts
(infra/data/versions.yaml), serving policy constants (infra/data/serving.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Image:
    image: str  # the repository path on its registry, e.g. vllm/vllm-openai
    tag: str
    registry: str = "docker.io"  # the upstream registry host
    digest: str | None = None  # sha256:..., only where read from the registry (versions.yaml)

    @property
    def pin(self) -> str:
        return f":{self.tag}@{self.digest}" if self.digest else f":{self.tag}"

    @property
    def ref(self) -> str:
        """The upstream reference (Docker Hub images without the host, as `docker pull` names them)."""
        host = "" if self.registry == "docker.io" else f"{self.registry}/"
        return f"{host}{self.image}{self.pin}"


@dataclass(frozen=True)
class Chart:
    name: str  # the release name
    chart: str
    repo: str  # "" for an OCI chart reference
    version: str
    namespace: str


@cache
def _load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((DATA_DIR / name).read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{DATA_DIR / name}: expected a mapping")
    return doc


def image(key: str) -> Image:
    v = _load("versions.yaml")["images"][key]
    return Image(image=str(v["image"]), tag=str(v["tag"]), registry=str(v.get("registry") or "docker.io"),
                 digest=str(v["digest"]) if v.get("digest") else None)


def image_digest_status(key: str) -> str:
    """Why an image has no digest pin (versions.yaml `digest_status`), or "" when it has one."""
    v = _load("versions.yaml")["images"][key]
    return "" if v.get("digest") else str(v.get("digest_status") or "unverified")


def registries() -> dict[str, Any]:
    """infra/data/registries.yaml: upstream registries, their pull-through cache prefixes, the rules' sources."""
    return _load("registries.yaml")


def chart(key: str) -> Chart:
    v = _load("versions.yaml")["charts"][key]
    return Chart(name=key.replace("_", "-"), chart=str(v["chart"]), repo=str(v["repo"]),
                 version=str(v["version"]), namespace=str(v["namespace"]))


def chart_image(key: str) -> tuple[str, str] | None:
    """(upstream registry host, repository path) of a chart's image that llmcap routes through the cache."""
    v = _load("versions.yaml")["charts"][key].get("image")
    return (str(v["registry"]), str(v["path"])) if v else None


def chart_app_version(key: str) -> str:
    """The application version a chart installs (its appVersion), where the versions file records it."""
    return str(_load("versions.yaml")["charts"][key]["app_version"])


@dataclass(frozen=True)
class Compatibility:
    """One row of the compatibility table: a component version and the Kubernetes minors it supports."""

    version: str
    kubernetes_min: str
    kubernetes_max: str | None  # None: the source states only a minimum
    rule: str
    source: str
    as_of: str


def compatibility() -> dict[str, Compatibility]:
    """infra/data/versions.yaml `compatibility`: component key -> its row."""
    rows = _load("versions.yaml")["compatibility"]
    return {k: Compatibility(version=str(v["version"]), kubernetes_min=str(v["kubernetes_min"]),
                             kubernetes_max=None if v["kubernetes_max"] is None else str(v["kubernetes_max"]),
                             rule=str(v["rule"]), source=str(v["source"]), as_of=str(v["as_of"]))
            for k, v in rows.items()}


def serving() -> dict[str, Any]:
    """infra/data/serving.yaml as a mapping (policy constants with their reasons)."""
    return _load("serving.yaml")


def vllm_flags() -> dict[str, Any]:
    return _load("vllm_flags.yaml")
