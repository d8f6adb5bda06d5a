"""Fitted efficiency constants of the performance model, and the interconnect figures it needs.

Owns: reading `sizing/data/perf_calibration.json` (written only by `bench/calibrate.py`, with
the fit date, source file and fit error) and `sizing/data/interconnects.csv` (PCIe figures per
GPU, with sources). Must not import pulumi, boto3, numpy or the planner.

Units: efficiencies are dimensionless fractions of a datasheet peak; overheads in ms per engine
step (plus microseconds per running
sequence per step); all-reduce latency in microseconds per ring hop; bandwidths in GB/s (1e9 bytes/s).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from sizing.errors import LlmcapError

DATA_DIR = Path(__file__).parent / "data"
CALIBRATION_FILE = DATA_DIR / "perf_calibration.json"
INTERCONNECT_FILE = DATA_DIR / "interconnects.csv"


class PerfModelError(LlmcapError):
    """The performance model lacks a figure it needs (e.g. a GPU with no compute figure)."""


@dataclass(frozen=True)
class Calibration:
    """Fitted constants. Keys of the per-generation maps are Gpu.generation values; a
    generation without data uses the `default` entry (the geometric mean of fitted ones)."""

    bandwidth_efficiency: dict[str, float]
    compute_efficiency: dict[str, float]
    engine_efficiency: dict[str, float]
    step_overhead_ms: dict[str, float]
    weight_only_compute_efficiency: float
    allreduce_latency_us: dict[str, float]
    interconnect_efficiency: dict[str, float]
    fitted_compute_tflops: dict[str, float]
    step_overhead_per_seq_us: dict[str, float] = field(default_factory=dict)
    roofline_sharpness: float = 8.0
    fitted_on: str = ""
    source_file: str = ""
    fit_error: dict[str, Any] = field(default_factory=dict)

    def bw_eff(self, generation: str) -> float:
        return self.bandwidth_efficiency.get(generation, self.bandwidth_efficiency["default"])

    def compute_eff(self, generation: str) -> float:
        return self.compute_efficiency.get(generation, self.compute_efficiency["default"])

    def engine_eff(self, engine: str) -> float:
        if engine not in self.engine_efficiency:
            raise PerfModelError(f"no fitted efficiency for engine {engine!r}; "
                                 f"known: {', '.join(sorted(self.engine_efficiency))}")
        return self.engine_efficiency[engine]

    def overhead_s(self, engine: str) -> float:
        return self.step_overhead_ms.get(engine, self.step_overhead_ms["default"]) / 1000.0

    def overhead_per_seq_s(self, engine: str) -> float:
        return self.step_overhead_per_seq_us.get(engine, self.step_overhead_per_seq_us.get("default", 0.0)) / 1e6

    def summary(self) -> str:
        """One assumption line for a Plan: where the constants come from and how good they are."""
        err = self.fit_error.get("overall", {})
        parts = ", ".join(f"{k} {v:.0%}" for k, v in err.items() if isinstance(v, float))
        return (f"performance model fitted {self.fitted_on} on {self.source_file}"
                + (f" (median abs. error {parts})" if parts else ""))


def calibration_from_dict(d: dict[str, Any]) -> Calibration:
    p = d["parameters"]
    return Calibration(
        bandwidth_efficiency=dict(p["bandwidth_efficiency"]), compute_efficiency=dict(p["compute_efficiency"]),
        engine_efficiency=dict(p["engine_efficiency"]), step_overhead_ms=dict(p["step_overhead_ms"]),
        weight_only_compute_efficiency=float(p["weight_only_compute_efficiency"]),
        allreduce_latency_us=dict(p["allreduce_latency_us"]),
        interconnect_efficiency=dict(p["interconnect_efficiency"]),
        fitted_compute_tflops={k: float(v["value"]) for k, v in p.get("fitted_compute_tflops", {}).items()},
        step_overhead_per_seq_us=dict(p.get("step_overhead_per_seq_us", {})),
        roofline_sharpness=float(p.get("roofline_sharpness", 8.0)),
        fitted_on=d.get("fitted_on", ""), source_file=d.get("source_file", ""), fit_error=d.get("fit_error", {}))


_OVERRIDE: list[Calibration] = []


def override_calibration(cal: Calibration | None) -> None:
    """Use `cal` instead of the data file (bench/calibrate.py while fitting); None restores it.
    Callers must also clear sizing.perf's cache (sizing.perf.clear_caches)."""
    _OVERRIDE[:] = [cal] if cal is not None else []


def load_calibration(path: str | None = None) -> Calibration:
    """The fitted constants: an override while fitting, else the data file (cached json read)."""
    if _OVERRIDE and path is None:
        return _OVERRIDE[0]
    return _load_file(path)


@lru_cache(maxsize=4)
def _load_file(path: str | None) -> Calibration:
    p = Path(path) if path else CALIBRATION_FILE
    if not p.is_file():
        raise PerfModelError(f"performance calibration {str(p)!r} is missing; run `python bench/calibrate.py`")
    with p.open(encoding="utf-8") as f:
        return calibration_from_dict(json.load(f))


@lru_cache(maxsize=1)
def pcie_bandwidth_gbs() -> dict[str, float]:
    """GPU name -> PCIe bandwidth per direction, GB/s (from interconnects.csv)."""
    with INTERCONNECT_FILE.open(newline="", encoding="utf-8") as f:
        return {r["gpu"]: float(r["pcie_bandwidth_gbs_per_direction"]) for r in csv.DictReader(f)}
