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


def serving() -> dict[str, Any]:
    """infra/data/serving.yaml as a mapping (policy constants with their reasons)."""
    return _load("serving.yaml")


def vllm_flags() -> dict[str, Any]:
    return _load("vllm_flags.yaml")
