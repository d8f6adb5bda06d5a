"""The results file `llmcap bench --out` writes and `verify` / `calibrate` read (versioned JSON)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sizing.errors import SpecError
from sizing.measure.metrics import RunMetrics
from sizing.plan import SCHEMA_VERSION as PLAN_SCHEMA_VERSION
from sizing.plan import Plan
from sizing.user_files import read_user_file

RESULTS_SCHEMA_VERSION = 1
# No figure in a results file comes near this (tokens/s, ms, counts); 1e308 overflowed later arithmetic.
MAX_FIGURE = 1e15


class BenchResults(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = RESULTS_SCHEMA_VERSION
    kind: str = "llmcap-bench"
    endpoint: str
    served_model: str
    api: str  # completions | chat
    stack: str
    started_at: str  # ISO 8601, UTC
    seed: int
    demand_share: float = 1.0  # share of the plan's demand this endpoint carries
    replicas_under_test: float | None = None  # replicas behind the endpoint (calibrate divides by it)
    workload: dict[str, Any]  # the stack's validated WorkloadSpec
    runs: list[RunMetrics]
    plan: Plan | None = None  # the plan the deployment follows, when known (verify and calibrate use it)
    notes: list[str] = Field(default_factory=list)

    def planned_run(self) -> RunMetrics:
        """The run verify judges: the one at the planned load, else the highest load."""
        for r in self.runs:
            if r.planned:
                return r
        return max(self.runs, key=lambda r: r.load)


def _poison(obj: Any, path: str, in_runs: bool) -> str | None:
    """The first figure no measurement can give, as `path: what (got X)`; None when clean.

    Every number must be finite and at most MAX_FIGURE in size; under `runs` (throughputs, latencies,
    counts, loads) it must also be >= 0; every `schema_version`, however deeply nested, must be one
    this llmcap reads (a NaN throughput once made later plans buy ~5x the GPUs)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            where = f"{path}.{k}" if path else str(k)
            want = PLAN_SCHEMA_VERSION if where == "plan.schema_version" else RESULTS_SCHEMA_VERSION
            if k == "schema_version" and (v != want or isinstance(v, bool)):
                return f"{where}: schema_version {v!r}; this llmcap reads {want}"
            found = _poison(v, where, in_runs or where == "runs")
            if found:
                return found
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found = _poison(v, f"{path}.{i}", in_runs)
            if found:
                return found
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        if isinstance(obj, float) and not math.isfinite(obj):
            return f"{path}: must be a finite number (got {obj!r})"
        if abs(obj) > MAX_FIGURE:
            return f"{path}: {obj:.3g} is beyond any measurement (at most {MAX_FIGURE:g})"
        if in_runs and obj < 0:
            return f"{path}: must not be negative (got {obj!r})"
    return None


def load_results(path: str | Path) -> BenchResults:
    """A bench results file, strictly validated; any problem is one SpecError line naming the field."""
    p = Path(path)
    text = read_user_file(p, "results file", f"write one with llmcap bench ... --out {p}")
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raise SpecError(f"{p}: not an llmcap bench results file (not JSON)") from None
    if not isinstance(raw, dict):
        raise SpecError(f"{p}: not an llmcap bench results file (a JSON object is expected)")
    bad = _poison(raw, "", False)
    if bad:
        raise SpecError(f"{p}: {bad}; re-run llmcap bench --out to get a clean file")
    try:
        res = BenchResults.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise SpecError(f"{p}: not an llmcap bench results file ({where}: {first['msg']})") from None
    if not res.runs:
        raise SpecError(f"{p}: holds no runs")
    if not 0 < res.demand_share <= 1:
        raise SpecError(f"{p}: demand_share must be in (0, 1] (got {res.demand_share!r})")
    if res.replicas_under_test is not None and res.replicas_under_test <= 0:
        raise SpecError(f"{p}: replicas_under_test must be positive (got {res.replicas_under_test!r})")
    return res
