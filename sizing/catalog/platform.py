"""Platform defaults (sizing/data/platform.csv): system nodes, NAT gateways, image size and the
storage throughputs used for cold-start estimates. One place for each default."""

from __future__ import annotations

import csv
from functools import lru_cache

from sizing.catalog.paths import BUNDLED_DIR


@lru_cache(maxsize=1)
def platform_defaults() -> dict[str, str]:
    with (BUNDLED_DIR / "platform.csv").open(newline="") as f:
        return {r["item"]: r["value"] for r in csv.DictReader(f)}


def setting(name: str) -> str:
    return platform_defaults()[name]


def number(name: str) -> float:
    return float(platform_defaults()[name])
