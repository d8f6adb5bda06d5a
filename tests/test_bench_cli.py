"""`llmcap bench` end to end against the local streaming server; a server that is down or refuses us."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.measure.results import load_results
from tests.bench_helpers import bench_app, free_port, write_stack
from tests.fake_openai_server import FakeServer, FakeServerConfig
from tests.plan_factory import make_plan

ENV = {"COLUMNS": "200"}


@pytest.fixture(autouse=True)
def no_user_overlay(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLMCAP_CALIBRATION_OVERLAY", str(tmp_path / "no-overlay.json"))


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    cfg = getattr(request, "param", FakeServerConfig(ttft_s=0.03, itl_s=0.005))
    s = FakeServer(cfg).start()
    yield s
    s.stop()


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    r = CliRunner().invoke(bench_app(), list(args), env={**ENV, **(env or {})})
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize("server", [FakeServerConfig(ttft_s=0.03, itl_s=0.005, model="meta-llama-3-8b-instruct")],
                         indirect=True)
def test_bench_writes_results_and_prints_a_table(server: FakeServer, tmp_path: Path) -> None:
    stack = write_stack(tmp_path)
    plan = tmp_path / "plan.json"
    plan.write_text(make_plan().to_json())
    out = tmp_path / "results.json"
    code, stdout, stderr = run("bench", server.url, "--stack", str(stack), "--plan", str(plan),
                               "--concurrency", "1", "--concurrency", "2", "--duration", "0.8", "--out", str(out))
    assert code == 0, stderr
    assert "TTFT p50/p95/p99 ms" in stdout and "Traceback" not in stdout + stderr
    res = load_results(out)
    assert [r.load for r in res.runs] == [1, 2]
    assert res.plan is not None and res.served_model == "meta-llama-3-8b-instruct"  # the plan's served name
    assert all(r.completed > 0 and r.errors == 0 for r in res.runs)
    assert res.runs[1].ttft_ms.p50 is not None and res.runs[1].ttft_ms.p50 >= 30


def test_bench_json_and_model_discovery(server: FakeServer, tmp_path: Path) -> None:
    stack = write_stack(tmp_path)
    code, stdout, stderr = run("bench", server.url + "/v1", "--stack", str(stack), "--concurrency", "2",
                               "--duration", "0.5", "--format", "json")
    assert code == 0, stderr
    doc = json.loads(stdout)
    assert doc["served_model"] == "fake-model"  # the plan's name is not served: the one GET /v1/models lists
    assert any("does not list the plan's model" in n for n in doc["notes"])
    assert doc["runs"][0]["completed"] > 0 and doc["runs"][0]["slo_itl_p95_ms"] == 50


def test_bench_sweeps_around_the_planned_load_by_default(server: FakeServer, tmp_path: Path) -> None:
    stack = write_stack(tmp_path, users=4, output=3)
    code, stdout, stderr = run("bench", server.url, "--stack", str(stack), "--model", "fake-model",
                               "--duration", "0.4", "--format", "json")
    assert code == 0, stderr
    runs = json.loads(stdout)["runs"]
    assert [(r["load"], r["planned"]) for r in runs] == [(2, False), (4, True), (6, False)]


def test_a_server_that_is_down_gives_one_clear_line(tmp_path: Path) -> None:
    port = free_port()
    code, stdout, stderr = run("bench", f"http://127.0.0.1:{port}", "--stack", str(write_stack(tmp_path)),
                               "--concurrency", "1", "--duration", "0.5")
    assert code == 2
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach http://127.0.0.1:{port}"), stderr
    assert "Traceback" not in stdout + stderr


@pytest.mark.parametrize("server", [FakeServerConfig(ttft_s=0.01, itl_s=0.002, api_key="s3cret")], indirect=True)
def test_api_key_from_an_environment_variable(server: FakeServer, tmp_path: Path) -> None:
    stack = str(write_stack(tmp_path, output=3))
    code, _, stderr = run("bench", server.url, "--stack", stack, "--concurrency", "1", "--duration", "0.3")
    assert code == 2 and "--api-key-env" in stderr
    code, _, stderr = run("bench", server.url, "--stack", stack, "--concurrency", "1", "--duration", "0.3",
                          "--api-key-env", "BENCH_KEY", env={"BENCH_KEY": "s3cret"})
    assert code == 0, stderr
    code, _, stderr = run("bench", server.url, "--stack", stack, "--api-key-env", "NOT_SET_ANYWHERE_42")
    assert code == 2 and "NOT_SET_ANYWHERE_42" in stderr


@pytest.mark.parametrize("server", [FakeServerConfig(ttft_s=0.01, itl_s=0.002, error_every=1)], indirect=True)
def test_all_requests_failing_is_reported_after_the_table(server: FakeServer, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    code, stdout, stderr = run("bench", server.url, "--stack", str(write_stack(tmp_path)), "--concurrency", "2",
                               "--duration", "1", "--out", str(out))
    assert code == 1 and "requests failed (http-500)" in stderr and "Traceback" not in stderr  # a check failed
    assert load_results(out).runs[0].errors == load_results(out).runs[0].requests_sent > 0


def test_bad_inputs_are_one_line_each(tmp_path: Path) -> None:
    stack = str(write_stack(tmp_path))
    for args, needle in ((["ftp://127.0.0.1:1"], "http"), (["http://127.0.0.1:1", "--api", "grpc"], "--api"),
                         (["http://127.0.0.1:1", "--duration", "0"], "--duration"),
                         (["http://127.0.0.1:1", "--concurrency", "1", "--rate", "2"], "not both")):
        code, _, stderr = run("bench", *args, "--stack", stack)
        assert code == 2 and needle in stderr and "Traceback" not in stderr, (args, stderr)
