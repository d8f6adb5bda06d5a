"""`llmcap bench --endpoint vllm=URL --endpoint sglang=URL`: two engines side by side under the same seed,
prompts and arrivals; a broken endpoint is reported while the other still is; calibrate feeds each engine's
results into its own overlay entry. Fake OpenAI servers on loopback stand in for both engines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.measure.results import load_results
from sizing.perf.overlay import load_overlay
from tests.bench_helpers import bench_app, free_port, make_results, write_stack
from tests.fake_openai_server import FakeServer, FakeServerConfig
from tests.plan_factory import make_plan, make_pool

ENV = {"COLUMNS": "250"}
ROOT = Path(__file__).resolve().parents[1]
MODEL = "meta-llama-3-8b-instruct"


@pytest.fixture(autouse=True)
def no_user_overlay(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLMCAP_CALIBRATION_OVERLAY", str(tmp_path / "no-overlay.json"))


@pytest.fixture
def two() -> Iterator[tuple[FakeServer, FakeServer]]:
    a = FakeServer(FakeServerConfig(ttft_s=0.02, itl_s=0.004, model=MODEL)).start()
    b = FakeServer(FakeServerConfig(ttft_s=0.04, itl_s=0.008, model=MODEL)).start()
    yield a, b
    a.stop()
    b.stop()


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(bench_app(), list(args), env=ENV)
    return r.exit_code, r.stdout, r.stderr


def test_two_engines_side_by_side(two: tuple[FakeServer, FakeServer], tmp_path: Path) -> None:
    vllm, sglang = two
    out = tmp_path / "results"
    code, stdout, stderr = run("bench", "--endpoint", f"vllm={vllm.url}", "--endpoint", f"sglang={sglang.url}",
                               "--stack", str(write_stack(tmp_path)), "--concurrency", "2", "--duration", "0.6",
                               "--out", str(out))
    assert code == 0, stdout + stderr
    assert "side by side" in stdout and "measured vs predicted" in stdout and "Traceback" not in stdout + stderr
    for col in ("TTFT p50/p95/p99 ms", "ITL p50/p95/p99 ms", "TPOT p50/p95/p99 ms", "E2E p50/p95/p99 ms",
                "goodput req/s"):
        assert col in stdout
    v, s = load_results(out / "vllm.json"), load_results(out / "sglang.json")
    assert v.seed == s.seed and [r.load for r in v.runs] == [r.load for r in s.runs]
    assert v.plan is not None and s.plan is not None
    assert {p.engine for p in v.plan.pools} == {"vllm"} and {p.engine for p in s.plan.pools} == {"sglang"}
    # the slower fake is slower in the table's figures too
    assert s.runs[0].ttft_ms.p50 is not None and v.runs[0].ttft_ms.p50 is not None
    assert s.runs[0].ttft_ms.p50 > v.runs[0].ttft_ms.p50


def test_a_broken_endpoint_is_reported_and_the_other_still_is(two: tuple[FakeServer, FakeServer],
                                                               tmp_path: Path) -> None:
    vllm, _ = two
    down = f"http://127.0.0.1:{free_port()}"
    code, stdout, stderr = run("bench", "--endpoint", f"vllm={vllm.url}", "--endpoint", f"sglang={down}",
                               "--stack", str(write_stack(tmp_path)), "--concurrency", "2", "--duration", "0.5",
                               "--format", "json")
    assert code == 1, stdout + stderr
    doc = json.loads(stdout)["endpoints"]
    assert doc["vllm"]["error"] is None and doc["vllm"]["results"]["runs"][0]["completed"] > 0
    assert doc["sglang"]["results"] is None and "cannot reach" in doc["sglang"]["error"]
    assert "sglang" in stderr and "Traceback" not in stderr


def test_an_endpoint_whose_requests_all_fail_is_reported(tmp_path: Path) -> None:
    good = FakeServer(FakeServerConfig(ttft_s=0.01, itl_s=0.002, model=MODEL)).start()
    bad = FakeServer(FakeServerConfig(ttft_s=0.01, itl_s=0.002, model=MODEL, error_every=1)).start()
    try:
        code, stdout, stderr = run("bench", "--endpoint", f"vllm={good.url}", "--endpoint", f"sglang={bad.url}",
                                   "--stack", str(write_stack(tmp_path)), "--concurrency", "1", "--duration", "0.4")
    finally:
        good.stop()
        bad.stop()
    assert code == 1
    assert "MISSED" in stdout and "error: sglang" in stdout and "all" in stdout and " met " in stdout


def test_endpoint_arguments_are_checked(tmp_path: Path) -> None:
    stack = str(write_stack(tmp_path))
    for args, msg in ((["--endpoint", "no-url"], "NAME=URL"),
                      (["--endpoint", "a=http://x", "--endpoint", "a=http://y"], "twice"),
                      (["http://x", "--endpoint", "a=http://y"], "not both"),
                      ([], "not both")):
        code, stdout, stderr = run("bench", *args, "--stack", stack, "--duration", "0.2")
        assert code == 2 and msg in stdout + stderr and "Traceback" not in stdout + stderr


def test_calibrate_feeds_each_engine_into_its_own_overlay_entry(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # each side's results carry its engine's plan; the overlay entry is keyed by the pool's engine
    from sizing.perf.overlay import ENV_VAR
    from tests.test_bench_verify_calibrate import calibration_runs

    monkeypatch.setenv(ENV_VAR, str(tmp_path / "overlay.json"))
    for engine, scale in (("vllm", 0.7), ("sglang", 0.9)):
        plan = make_plan(pools=[make_pool().model_copy(update={"engine": engine})])
        f = tmp_path / f"{engine}.json"
        f.write_text(make_results(plan, calibration_runs(scale * 900 * 5), replicas=5).model_dump_json())
        code, _, stderr = run("calibrate", "--from", str(f))
        assert code == 0, stderr
    ov = load_overlay()
    model = "meta-llama/Meta-Llama-3-8B-Instruct"
    v, s = ov.entry("L4", "vllm", model), ov.entry("L4", "sglang", model)
    assert v is not None and v.goodput_scale == pytest.approx(0.7)
    assert s is not None and s.goodput_scale == pytest.approx(0.9)


def test_a_goodput_no_heavier_run_missed_is_shown_as_a_lower_bound(two: tuple[FakeServer, FakeServer],
                                                                    tmp_path: Path) -> None:
    vllm, sglang = two
    code, stdout, stderr = run("bench", "--endpoint", f"vllm={vllm.url}", "--endpoint", f"sglang={sglang.url}",
                               "--stack", str(write_stack(tmp_path)), "--concurrency", "1", "--duration", "0.4")
    assert code == 0, stderr
    assert "≥ " in stdout and "bench heavier loads" in stdout


def test_calibrate_against_a_stack_of_several_engines_plans_the_engine_benched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sizing.perf.overlay import ENV_VAR
    from tests.test_bench_verify_calibrate import calibration_runs

    monkeypatch.setenv(ENV_VAR, str(tmp_path / "overlay.json"))
    stack = ROOT / "stacks" / "Pulumi.engines.yaml"  # plans vLLM as its choice
    sglang_plan = make_plan(pools=[make_pool(gpu="L40S").model_copy(update={"engine": "sglang"})])
    f = tmp_path / "sglang.json"
    f.write_text(make_results(sglang_plan, calibration_runs(5000), replicas=7).model_dump_json())
    code, stdout, stderr = run("calibrate", "--from", str(f), "--stack", str(stack), "--format", "json")
    assert code == 0, stdout + stderr  # the runs saturate: calibrate takes them
    assert json.loads(stdout)["entry"]["engine"] == "sglang"
    no_plan = tmp_path / "unknown.json"
    no_plan.write_text(make_results(None, calibration_runs(5000), replicas=7).model_dump_json())
    code, _, stderr = run("calibrate", "--from", str(no_plan), "--stack", str(stack))
    assert code == 2 and "which engine" in stderr


def test_verify_against_a_stack_of_several_engines_judges_the_engine_benched(tmp_path: Path) -> None:
    from sizing.planning.planner import plan_for
    from tests.test_bench_verify_calibrate import calibration_runs

    stack = ROOT / "stacks" / "Pulumi.engines.yaml"
    sglang_plan = plan_for(stack, ["workload.engine=sglang"])
    f = tmp_path / "sglang.json"
    f.write_text(make_results(sglang_plan, calibration_runs(5000), replicas=7).model_dump_json())
    (tmp_path / "plan.json").write_text(sglang_plan.to_json())
    by_stack = run("verify", str(f), "--stack", str(stack), "--format", "json")
    by_plan = run("verify", str(f), "--plan", str(tmp_path / "plan.json"), "--format", "json")
    assert by_stack[0] in (0, 1) and by_plan[0] == by_stack[0], by_stack[2]
    predicted = [[c["predicted"] for c in json.loads(out)["criteria"]] for _, out, _ in (by_stack, by_plan)]
    assert predicted[0] == predicted[1]
