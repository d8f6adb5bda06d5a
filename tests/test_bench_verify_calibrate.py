"""`llmcap verify` pass/fail and gaps; `llmcap calibrate` and the overlay the planner applies."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sizing.errors import SpecError
from sizing.measure.results import BenchResults
from sizing.perf.overlay import (
    ENV_VAR,
    Overlay,
    OverlayEntry,
    load_overlay,
    overlay_path,
)
from sizing.plan import Plan
from sizing.planning.planner import plan_stack
from sizing.stack import load_stack
from tests.bench_helpers import bench_app, make_results, make_run
from tests.plan_factory import make_plan, make_pool

ROOT = Path(__file__).resolve().parents[1]
PROD = ROOT / "stacks" / "Pulumi.prod.yaml"


@pytest.fixture(autouse=True)
def overlay_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    p = tmp_path / "cfg" / "calibration_overlay.json"
    monkeypatch.setenv(ENV_VAR, str(p))
    return p


def save(res: BenchResults, tmp_path: Path, name: str = "results.json") -> Path:
    p = tmp_path / name
    p.write_text(res.model_dump_json())
    return p


def cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(bench_app(), list(args), env={"COLUMNS": "200"})
    return r.exit_code, r.stdout, r.stderr


# make_plan: 1 pool, 5 replicas (4 for demand), per replica TTFT p95 400 ms, ITL p95 22 ms, means 250/20 ms,
# goodput 900 tokens/s; totals demand 3,000 and capacity 3,600 output tokens/s.
def planned_throughput(load: float) -> float:
    return min(load * 512 / ((250 + 511 * 20) / 1000), 3600)


def test_verify_passes_when_measurement_meets_slo_and_plan(tmp_path: Path) -> None:
    run = make_run(60, planned_throughput(60) * 1.05, ttft_p95=450, itl_p95=22, planned=True)
    code, out, err = cli("verify", str(save(make_results(make_plan(), [run]), tmp_path)))
    assert code == 0, out + err
    assert "verify: PASS" in out and "FAIL" not in out
    assert "+12%" in out  # TTFT p95 450 measured vs 400 predicted


def test_verify_fails_and_names_each_missed_criterion(tmp_path: Path) -> None:
    run = make_run(60, planned_throughput(60) * 0.5, ttft_p95=1500, itl_p95=30, planned=True, errors=5)
    code, out, _ = cli("verify", str(save(make_results(make_plan(), [run]), tmp_path)), "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["passed"] is False
    assert set(doc["failed"]) == {"TTFT p95 <= SLO", "ITL p95 <= SLO", "error rate <= max",
                                  "goodput >= planned demand", "output tokens/s within ±tolerance of predicted"}
    itl = next(c for c in doc["criteria"] if c["name"] == "ITL p95 <= SLO")
    assert itl["gap_pct"] == pytest.approx((30 / 22 - 1) * 100)


def test_verify_judges_the_planned_run_and_reports_capacity(tmp_path: Path) -> None:
    runs = [make_run(30, planned_throughput(30), 300, 20), make_run(60, planned_throughput(60), 450, 22, planned=True),
            make_run(90, 3400, 1400, 40)]
    code, out, _ = cli("verify", str(save(make_results(make_plan(), runs), tmp_path)), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["judged_run"]["load"] == 60
    cap = next(c for c in doc["criteria"] if c["name"].startswith("goodput capacity"))
    assert cap["measured"] == pytest.approx(planned_throughput(60)) and cap["predicted"] == 3600


def test_verify_needs_a_plan(tmp_path: Path) -> None:
    code, _, err = cli("verify", str(save(make_results(None, [make_run(1, 10, 1, 1)]), tmp_path)))
    assert code == 2 and "--plan" in err
    code, _, err = cli("verify", str(tmp_path / "missing.json"))
    assert code == 2 and "no such results file" in err


def calibration_runs(measured_total: float) -> list:
    return [make_run(40, measured_total * 0.6, 300, 18), make_run(60, measured_total, 800, 24, planned=True),
            make_run(90, measured_total * 1.1, 2500, 60)]


def test_calibrate_writes_measured_over_predicted_and_leaves_bundled_data(tmp_path: Path, overlay_file: Path) -> None:
    data = ROOT / "sizing" / "data"
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(data.iterdir()) if p.is_file()}
    res = make_results(make_plan(), calibration_runs(0.7 * 900 * 5), replicas=5)
    code, out, err = cli("calibrate", "--from", str(save(res, tmp_path)))
    assert code == 0, err
    e = load_overlay().entry("l4", "VLLM", "meta-llama/meta-llama-3-8b-instruct")  # keys are case-insensitive
    assert e is not None and e.goodput_scale == pytest.approx(0.7) and not e.lower_bound
    assert e.itl_p95_scale == pytest.approx(24 / 22) and e.ttft_p95_scale == pytest.approx(800 / 400)
    assert overlay_file.exists() and "goodput × 0.700" in out
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(data.iterdir()) if p.is_file()}
    assert before == after


def test_calibrate_divides_out_a_scale_the_plan_already_applied(tmp_path: Path) -> None:
    # the scale travels as Pool.goodput_scale (the assumption line is prose for people, not read back)
    plan = make_plan(pools=[make_pool().model_copy(update={"goodput_scale": 0.8})],
                     assumptions=["calibration overlay: goodput × 0.800 for L4/vllm/meta-llama/Meta-Llama-3-8B-"
                                  "Instruct from /x.json: measured 720 vs predicted 900 output tokens/s per replica"])
    # the plan's 900 tokens/s per replica already includes × 0.8: the bundled prediction is 1,125
    res = make_results(plan, calibration_runs(0.6 * 1125 * 5), replicas=5)
    assert cli("calibrate", "--from", str(save(res, tmp_path)))[0] == 0
    e = load_overlay().entry("L4", "vllm", "meta-llama/Meta-Llama-3-8B-Instruct")
    assert e is not None and e.goodput_scale == pytest.approx(0.6, rel=1e-3)


def test_calibrate_refuses_a_sweep_that_proves_nothing(tmp_path: Path) -> None:
    unsaturated = [make_run(40, 1000, 300, 18), make_run(60, 1500, 400, 20, planned=True)]
    code, _, err = cli("calibrate", "--from", str(save(make_results(make_plan(), unsaturated, replicas=5), tmp_path)))
    assert code == 1 and "bench heavier loads" in err
    none_met = [make_run(40, 1000, 3000, 18)]
    code, _, err = cli("calibrate", "--from", str(save(make_results(make_plan(), none_met, replicas=5), tmp_path)))
    assert code == 1 and "no run met the SLO" in err
    two_pools = make_plan(pools=[make_pool(name="a"), make_pool(name="b", gpu="A10G")])
    code, _, err = cli("calibrate", "--from", str(save(make_results(two_pools, calibration_runs(3000), replicas=5),
                                                       tmp_path)))
    assert code == 2 and "--pool" in err


def test_overlay_file_handling(tmp_path: Path, overlay_file: Path) -> None:
    assert overlay_path() == overlay_file and load_overlay().entries == []
    ov = Overlay()
    ov.upsert(OverlayEntry(gpu="L4", engine="vllm", model="m/x", goodput_scale=0.5,
                           measured_goodput_output_tokens_per_s_per_replica=50,
                           predicted_goodput_output_tokens_per_s_per_replica=100))
    ov.upsert(OverlayEntry(gpu="L4", engine="vllm", model="m/x", goodput_scale=0.8,
                           measured_goodput_output_tokens_per_s_per_replica=80,
                           predicted_goodput_output_tokens_per_s_per_replica=100))
    ov.save()
    got = load_overlay().goodput_scale("L4", "vllm", "m/x")
    assert got is not None and got[0] == 0.8 and len(load_overlay().entries) == 1
    assert load_overlay().goodput_scale("A10G", "vllm", "m/x") is None
    overlay_file.write_text("{not json")
    with pytest.raises(SpecError, match="fix or delete it"):
        load_overlay()


def calibrated_pair(tmp_path: Path) -> tuple[Plan, Plan]:
    """Plan, bench 30% under its predicted goodput per replica, calibrate, plan again."""
    # one GPU type, so the calibrated plan cannot simply switch to another GPU (that is the planner's right)
    doc = yaml.safe_load(PROD.read_text())
    doc["config"]["llmcap:hardware"]["gpus"] = ["H100-SXM"]
    stack = tmp_path / "Pulumi.prod-h100.yaml"
    stack.write_text(yaml.safe_dump(doc))
    baseline: Plan = plan_stack(load_stack(stack), goodput_scale=None)
    pool = baseline.pools[0]
    replicas = float(pool.replicas)
    measured = 0.7 * pool.per_replica.goodput_output_tokens_per_s * replicas
    res = make_results(baseline, calibration_runs(measured), replicas=replicas)
    code, _, err = cli("calibrate", "--from", str(save(res, tmp_path)), "--stack", str(stack))
    assert code == 0, err
    return baseline, plan_stack(load_stack(stack))  # default: the overlay at $LLMCAP_CALIBRATION_OVERLAY


def test_overlay_30pct_under_prediction_raises_the_next_plans_replicas(tmp_path: Path) -> None:
    """The loop closed: bench results 30% under the predicted goodput -> calibrate -> more replicas, stated."""
    baseline, after = calibrated_pair(tmp_path)
    pool = baseline.pools[0]
    same_gpu = [p for p in after.pools if p.gpu == pool.gpu]
    assert same_gpu and same_gpu[0].replicas > pool.replicas
    assert any(a.startswith("calibration overlay: goodput × 0.700 for " + pool.gpu) for a in after.assumptions)
    assert not any("calibration overlay" in a for a in baseline.assumptions)


def test_a_calibrated_plan_reports_the_goodput_it_sized_from(tmp_path: Path) -> None:
    """The contract verify and calibrate rely on: per-replica goodput in the Plan is the calibrated figure
    (replicas are sized from it, capacity sums it, and calibrate divides the noted scale back out)."""
    baseline, after = calibrated_pair(tmp_path)
    b, a = baseline.pools[0], after.pools[0]
    same_config = (a.instance_type, a.tensor_parallel, a.precision) == (b.instance_type, b.tensor_parallel, b.precision)
    ratio = a.per_replica.goodput_output_tokens_per_s / b.per_replica.goodput_output_tokens_per_s
    assert (ratio == pytest.approx(0.7, rel=0.01)) if same_config else ratio < 1.0, (
        f"Plan per-replica goodput after calibration is {ratio:.2f}× the uncalibrated one on the same "
        "configuration; the planner must write the scaled figure (sizing/planning/builder.py per_replica)")
    assert after.totals.capacity_output_tokens_per_s == pytest.approx(
        sum(p.replicas * p.per_replica.goodput_output_tokens_per_s for p in after.pools), rel=0.01)
