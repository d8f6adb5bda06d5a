"""The results file `llmcap bench --out` writes and `verify` / `calibrate` read (versioned JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sizing.bench.metrics import RunMetrics
from sizing.errors import SpecError
from sizing.plan import Plan
from sizing.user_files import read_user_file

RESULTS_SCHEMA_VERSION = 1


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


def load_results(path: str | Path) -> BenchResults:
    p = Path(path)
    text = read_user_file(p, "results file", f"write one with llmcap bench ... --out {p}")
    try:
        res = BenchResults.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise SpecError(f"{p}: not an llmcap bench results file ({where}: {first['msg']})") from None
    if res.schema_version != RESULTS_SCHEMA_VERSION:
        raise SpecError(f"{p}: results schema_version {res.schema_version}; this llmcap reads "
                        f"{RESULTS_SCHEMA_VERSION}")
    if not res.runs:
        raise SpecError(f"{p}: holds no runs")
    return res


