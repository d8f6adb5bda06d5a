"""Publisher/harness groups of the calibration sources (bench/source_groups.csv, each row with its
reason): the unit of evidence both of the validation (bench/accuracy.py leaves one group out at a
time) and of the fit's weights (bench/fitting.py: each (group, metric group) weighs equally)."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

GROUPS_FILE = Path(__file__).resolve().parent / "source_groups.csv"


class _Sourced(Protocol):
    source: str


def source_groups() -> dict[str, str]:
    """source prefix -> publisher/harness group (bench/source_groups.csv, each with its reason)."""
    with open(GROUPS_FILE, newline="", encoding="utf-8") as f:
        return {r["source"]: r["group"] for r in csv.DictReader(f)}


def group_key() -> Callable[[_Sourced], str]:
    """row -> its publisher/harness group; a source with no row in the file exits with one line."""
    groups = source_groups()

    def key(r: _Sourced) -> str:
        if r.source not in groups:
            raise SystemExit(f"error: source {r.source!r} has no group in {GROUPS_FILE.name}: add its row")
        return groups[r.source]
    return key
