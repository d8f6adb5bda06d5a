"""`llmcap compare`: golden JSON of a small sweep, the PNG plot, views, exit codes, and that
matplotlib stays out of the import path unless --plot is given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sizing.cli import compare_cmd
from tests.golden_files import GOLDEN_DIR, check_golden

ROOT = Path(__file__).resolve().parents[1]
L4 = str(ROOT / "stacks" / "Pulumi.scaleout-l4.yaml")
A100 = str(ROOT / "stacks" / "Pulumi.scaleup-a100.yaml")
DEV = str(ROOT / "stacks" / "Pulumi.dev.yaml")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLMCAP_CALIBRATION_OVERLAY", str(tmp_path / "no-overlay.json"))
    monkeypatch.delenv("LLMCAP_CATALOG_DIR", raising=False)
    monkeypatch.setenv("COLUMNS", "160")


def _app() -> typer.Typer:
    """The llmcap app once cli.py registers `compare`; until then a group holding only compare."""
    from sizing.cli import app

    if any(c.name == "compare" for c in app.registered_commands):
        return app
    solo = typer.Typer()
    solo.callback()(lambda: None)
    solo.command("compare")(compare_cmd.compare)
    return solo


def run(*args: str) -> object:
    return CliRunner().invoke(_app(), ["compare", *args])


def test_golden_json_of_a_small_users_sweep(update_golden: bool) -> None:
    r = run(L4, A100, "--sweep", "users=10..200:6", "--format", "json")
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    doc = json.loads(r.stdout)  # type: ignore[attr-defined]
    assert {"options", "winner", "crossovers", "sweep"} <= set(doc)
    assert doc["winner"] in {o["label"] for o in doc["options"]}
    assert doc["crossovers"] == doc["sweep"]["crossovers"]
    check_golden(GOLDEN_DIR / "compare" / "l4_a100_users_sweep.json", json.dumps(doc, indent=2) + "\n",
                 update_golden)


def test_plot_is_a_readable_png(tmp_path: Path) -> None:
    from matplotlib.image import imread

    png = tmp_path / "sweep.png"
    r = run(L4, A100, "--sweep", "users=5..400:40", "--plot", str(png))
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    assert png.exists()
    img = imread(png)
    h, w = img.shape[:2]
    assert w >= 800 and h >= 500
    grey = img[..., :3].mean(axis=2)
    assert grey.std() > 0.05, "the image is (nearly) one colour"
    assert (grey < 0.9).mean() > 0.01, "almost nothing is drawn"


def test_strategies_table_has_verdict_and_every_option() -> None:
    r = run(DEV, "--strategies", "scale-up,scale-out,mixed")
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    out = r.stdout  # type: ignore[attr-defined]
    for s in ("scale-up", "scale-out", "mixed", "verdict:", "capacity lost if one node fails", "cold start"):
        assert s in out
    assert "Traceback" not in out


def test_markdown_view() -> None:
    r = run(L4, A100, "--format", "markdown", "--sweep", "itl_ms=15..40/5")
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    md = r.stdout  # type: ignore[attr-defined]
    assert md.startswith("## Comparison") and "**Verdict:**" in md and "### Sweep over ITL p95 target" in md


@pytest.mark.parametrize("args,flag", [
    ([L4, A100, "--sweep", "users=100..10"], "--sweep"),
    ([L4, A100, "--sweep", "gpus=1..8"], "--sweep"),
    ([L4, A100, "--plot", "x.png"], "--plot"),
    ([L4, A100, "--sweep", "users=1..10", "--plot", "x.svg"], "--plot"),
    ([DEV, "--strategies", "scale-sideways"], "--strategies"),
    ([DEV], "--strategies"),
])
def test_bad_input_exits_2_with_one_line_naming_the_flag(args: list[str], flag: str) -> None:
    r = run(*args)
    assert r.exit_code == 2, r.output  # type: ignore[attr-defined]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("error:") and flag in lines[0], lines
    assert "Traceback" not in r.output  # type: ignore[attr-defined]


def test_infeasible_option_is_reported_not_fatal() -> None:
    # find, with the tool itself, an ITL target where L4 has no plan and A100 has one
    r = run(L4, A100, "--sweep", "itl_ms=1..60:60", "--format", "json")
    edges = json.loads(r.stdout)["sweep"]["feasibility_edges"]  # type: ignore[attr-defined]
    l4_min = next(e["x"] for e in edges if e["option"] == "scaleout-l4" and e["feasible"] == "above")
    a100_min = next((e["x"] for e in edges if e["option"] == "scaleup-a100" and e["feasible"] == "above"), 0.0)
    assert a100_min < l4_min, "the scenario no longer has an ITL only A100 meets"
    itl = (a100_min + l4_min) / 2
    r = run(L4, A100, "--set", f"workload.slo.itl_p95_ms={itl}", "--format", "json")
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    doc = json.loads(r.stdout)  # type: ignore[attr-defined]
    l4 = next(o for o in doc["options"] if o["label"] == "scaleout-l4")
    assert l4["feasible"] is False and l4["problems"]
    assert doc["winner"] == "scaleup-a100" and "no plan meets the SLO for scaleout-l4" in doc["reason"]


def test_nothing_feasible_exits_3() -> None:
    r = run(L4, A100, "--set", "workload.slo.itl_p95_ms=2.2")  # above one engine step, below any replica
    assert r.exit_code == 3, r.output  # type: ignore[attr-defined]
    assert "no option has a plan that meets the SLO" in r.stdout  # type: ignore[attr-defined]


def test_matplotlib_only_imported_for_plots() -> None:
    code = ("import sys, sizing.analysis.compare, sizing.analysis.sweep, sizing.analysis.comparison, "
            "sizing.cli.compare_cmd, sizing.report.compare_views; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
