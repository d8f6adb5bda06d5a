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
    image: str
    tag: str

    @property
    def ref(self) -> str:
        return f"{self.image}:{self.tag}"


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
    return Image(image=str(v["image"]), tag=str(v["tag"]))


def chart(key: str) -> Chart:
    v = _load("versions.yaml")["charts"][key]
    return Chart(name=key.replace("_", "-"), chart=str(v["chart"]), repo=str(v["repo"]),
                 version=str(v["version"]), namespace=str(v["namespace"]))


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
