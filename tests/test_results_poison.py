"""Poisoned bench results files (issue 18 item 4): NaN, Infinity, negative or absurd figures and a
nested schema_version the tool does not read are one-line errors (exit 2); the overlay stays as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sizing.perf.overlay import ENV_VAR
from sizing.plan import SCHEMA_VERSION as PLAN_SCHEMA_VERSION
from tests.bench_helpers import bench_app, make_results, make_run
from tests.plan_factory import make_plan


@pytest.fixture(autouse=True)
def overlay_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    p = tmp_path / "calibration_overlay.json"
    p.write_text('{"schema_version": 1, "entries": []}\n')
    monkeypatch.setenv(ENV_VAR, str(p))
    return p


def _good() -> dict[str, Any]:
    runs = [make_run(40, 1800, 300, 18), make_run(60, 3000, 800, 24, planned=True), make_run(90, 3300, 2500, 60)]
    return json.loads(make_results(make_plan(), runs, replicas=5).model_dump_json())


def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    node: Any = doc
    parts = path.split(".")
    for p in parts[:-1]:
        node = node[int(p)] if isinstance(node, list) else node[p]
    node[int(parts[-1]) if isinstance(node, list) else parts[-1]] = value
    return doc


CASES = [
    ("runs.1.output_tokens_per_s", float("nan"), "must be a finite number"),
    ("runs.1.output_tokens_per_s", -3000.0, "must not be negative"),
    ("runs.1.output_tokens_per_s", float("inf"), "must be a finite number"),
    ("runs.1.output_tokens_per_s", 1e308, "beyond any measurement"),
    ("runs.1.ttft_ms.p95", float("-inf"), "must be a finite number"),
    ("runs.0.load", -1, "must not be negative"),
    ("plan.schema_version", 99, f"schema_version 99; this llmcap reads {PLAN_SCHEMA_VERSION}"),
    ("workload.schema_version", 99, "schema_version 99"),
    ("replicas_under_test", 0, "replicas_under_test must be positive"),
    ("demand_share", 7, "demand_share must be in (0, 1]"),
]


@pytest.mark.parametrize("path,value,msg", CASES, ids=[f"{c[0]}={c[1]}" for c in CASES])
def test_poisoned_results_are_refused_in_one_line(tmp_path: Path, overlay_file: Path, path: str, value: Any,
                                                  msg: str) -> None:
    f = tmp_path / "results.json"
    f.write_text(json.dumps(_set(_good(), path, value)))  # json.dumps writes NaN / Infinity as Python does
    before = overlay_file.read_bytes()
    r = CliRunner().invoke(bench_app(), ["calibrate", "--from", str(f)])
    assert r.exit_code == 2, (r.exit_code, r.output, r.exception)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and msg in errors[0], r.stderr
    if "schema_version" not in path and "replicas" not in path and "share" not in path:
        assert path in errors[0]
    assert overlay_file.read_bytes() == before


def test_the_clean_file_calibrates(tmp_path: Path, overlay_file: Path) -> None:
    f = tmp_path / "results.json"
    f.write_text(json.dumps(_good()))
    r = CliRunner().invoke(bench_app(), ["calibrate", "--from", str(f)])
    assert r.exit_code == 0, r.output
    assert json.loads(overlay_file.read_text())["entries"]
