"""The staged rollout: `llmcap rollout STACK` lists canary → ten percent → full with commands and
thresholds; `llmcap verify --stage NAME` judges a run with that stage's demand share and the tolerance
from the model's held-out goodput range, and names the failing criterion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.catalog.lookup import load_catalog
from sizing.cli import app
from sizing.measure.results import BenchResults
from sizing.measure.rollout import STAGE_NAMES, stages, throughput_tolerance
from sizing.perf.overlay import ENV_VAR
from tests.bench_helpers import make_results, make_run
from tests.plan_factory import make_plan

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "stacks" / "Pulumi.dev.yaml"


@pytest.fixture(autouse=True)
def no_overlay(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "none.json"))


def cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return r.exit_code, r.stdout, r.stderr


def save(res: BenchResults, tmp_path: Path) -> Path:
    p = tmp_path / "canary.json"
    p.write_text(res.model_dump_json())
    return p


def test_tolerance_is_the_wider_side_of_the_held_out_goodput_range() -> None:
    cal = load_catalog().calibration
    p10, p90 = cal.goodput_range
    assert throughput_tolerance(cal) == pytest.approx(max(1 - p10, p90 - 1), abs=1e-3)


def test_stages_share_the_demand_and_carry_the_slo() -> None:
    plan = make_plan()  # 5 replicas, 4 for the demand
    got = stages(plan, load_catalog().calibration, "stacks/Pulumi.x.yaml")
    assert [s.name for s in got] == list(STAGE_NAMES)
    canary, ten, full = got
    assert (canary.replicas, canary.demand_share) == (1, 0.25)
    assert (ten.replicas, full.replicas, full.demand_share) == (1, 5, 1.0)
    limits = {t.criterion: t.limit for t in canary.thresholds}
    slo = plan.workload.slo
    assert limits["TTFT p95 <= SLO"] == f"{slo.ttft_p95_ms:g} ms"
    assert limits["ITL p95 <= SLO"] == f"{slo.itl_p95_ms:g} ms"
    assert any(c.startswith("llmcap eval ") for c in canary.commands)
    assert any("--stage canary" in c for c in canary.commands)


def test_verify_stage_canary_judges_one_replica_against_its_share(tmp_path: Path) -> None:
    # one replica at concurrency 15: about 733 output tokens/s, a quarter of the 3,000 planned
    run = make_run(15, 733.0, ttft_p95=450, itl_p95=22, planned=True)
    f = save(make_results(make_plan(), [run]), tmp_path)
    code, out, _ = cli("verify", str(f))  # judged against the whole demand: goodput fails
    assert code == 1 and "goodput >= planned demand" in out
    code, out, err = cli("verify", str(f), "--stage", "canary", "--format", "json")
    assert code == 0, out + err
    doc = json.loads(out)
    assert doc["stage"] == "canary" and doc["passed"] is True


def test_verify_stage_fails_naming_the_criterion(tmp_path: Path) -> None:
    run = make_run(15, 733.0, ttft_p95=450, itl_p95=31, planned=True)
    code, out, _ = cli("verify", str(save(make_results(make_plan(), [run]), tmp_path)), "--stage", "canary")
    assert code == 1
    assert "verify --stage canary: FAIL (ITL p95 <= SLO: 31.0 ms, limit 25.0)" in out


def test_verify_unknown_stage_is_bad_input(tmp_path: Path) -> None:
    run = make_run(15, 733.0, ttft_p95=450, itl_p95=22, planned=True)
    code, _, err = cli("verify", str(save(make_results(make_plan(), [run]), tmp_path)), "--stage", "half")
    assert code == 2 and err.startswith("error: --stage: 'half' is not one of canary, ten-percent, full")


def test_rollout_lists_the_stages_of_the_stack() -> None:
    code, out, err = cli("rollout", str(DEV), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert [s["name"] for s in doc] == list(STAGE_NAMES)
    assert doc[0]["replicas"] == 1 and doc[-1]["demand_share"] == 1.0
    code, out, _ = cli("rollout", str(DEV))
    assert code == 0 and "stage canary" in out and "llmcap verify canary.json" in out


def _eval_json(tmp_path: Path, candidate_correct: int) -> Path:
    from sizing.measure.quality import Accuracy, Verdict

    def acc(role: str, c: int) -> Accuracy:
        return Accuracy(role=role, endpoint=f"http://{role}", answered=100, correct=c, errors=0, accuracy=c / 100,
                        ci95=(0.0, 1.0))

    drop = (100 - candidate_correct) / 100
    v = Verdict(items=100, judged=100, reference=acc("reference", 100), candidate=acc("candidate", candidate_correct),
                drop=drop, drop_ci95=(drop, drop), max_drop=0.01, complete=True, passed=drop <= 0.01)
    p = tmp_path / "eval.json"
    p.write_text(json.dumps({"results": "r.jsonl", **v.model_dump(mode="json")}))
    return p


def test_verify_stage_gates_on_the_quality_verdict(tmp_path: Path) -> None:
    run = make_run(15, 733.0, ttft_p95=450, itl_p95=22, planned=True)
    f = save(make_results(make_plan(), [run]), tmp_path)
    code, out, _ = cli("verify", str(f), "--stage", "canary", "--eval", str(_eval_json(tmp_path, 100)))
    assert code == 0, out
    code, out, _ = cli("verify", str(f), "--stage", "canary", "--eval", str(_eval_json(tmp_path, 90)))
    assert code == 1
    assert "verify --stage canary: FAIL (quality: accuracy drop <= max drop: 10.0 points, limit 1.0)" in out
    (tmp_path / "bad.json").write_text("{}")
    code, _, err = cli("verify", str(f), "--stage", "canary", "--eval", str(tmp_path / "bad.json"))
    assert code == 2 and "not the JSON of llmcap eval --format json" in err
