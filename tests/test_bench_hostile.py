"""The load generator against hostile loopback servers (issue 18 item 11): every answer bounded in
time and bytes, one bad response is one error, never a traceback; the results file is always
written and all requests failing exits 1. The scenarios and their table: tests/hostile_suite.py
(`python bench/hostile_servers.py` prints it)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.measure.results import load_results
from tests.bench_helpers import bench_app, write_stack
from tests.fake_openai_server import FakeServer, FakeServerConfig
from tests.hostile_suite import HANG_GUARD_S, SCENARIOS, Scenario, run_scenario, table

ENV = {"COLUMNS": "200"}


@pytest.fixture(autouse=True)
def no_user_overlay(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLMCAP_CALIBRATION_OVERLAY", str(tmp_path / "no-overlay.json"))


# models-trickle waits out the 4 s /v1/models deadline: slow here, since
# test_a_trickling_models_endpoint_stops_at_the_request_timeout checks the same deadline at 1 s in the fast run
@pytest.mark.parametrize("sc", [pytest.param(s, marks=pytest.mark.slow) if s.mode == "models-trickle" else s
                                for s in SCENARIOS], ids=[s.mode for s in SCENARIOS])
def test_a_hostile_server_costs_one_bounded_error(sc: Scenario) -> None:
    """The outcome proves the bound (a cap's error kind, not the request timeout's); the seconds are
    only hang-guarded here (their target: `python bench/hostile_servers.py`)."""
    row = run_scenario(sc)
    print("\n" + table([row]))
    assert row.ok, f"{table([row])}\n{row.detail}"
    assert row.seconds < HANG_GUARD_S, table([row])


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    s = FakeServer(request.param).start()
    yield s
    s.stop()


def bench(url: str, tmp: Path, *extra: str) -> tuple[int, str, str, Path]:
    out = tmp / "results.json"
    r = CliRunner().invoke(bench_app(), ["bench", url, "--stack", str(write_stack(tmp, output=3)),
                                         "--model", "fake-model", "--duration", "0.5", "--out", str(out),
                                         *extra], env=ENV)
    return r.exit_code, r.stdout, r.stderr, out


@pytest.mark.parametrize("server", [FakeServerConfig(ttft_s=0.01, itl_s=0.002, hostile="data-number")],
                         indirect=True)
def test_every_request_odd_is_a_failed_check_with_results(server: FakeServer, tmp_path: Path) -> None:
    code, stdout, stderr, out = bench(server.url, tmp_path, "--concurrency", "2")
    assert code == 1, stderr  # a check failed, not bad input
    assert "requests failed (bad-stream)" in stderr and "Traceback" not in stdout + stderr
    run = load_results(out).runs[0]
    assert run.errors == run.requests_sent > 0 and run.error_kinds == {"bad-stream": run.errors}


@pytest.mark.parametrize("server", [FakeServerConfig(ttft_s=0.01, itl_s=0.002, hostile="models-trickle")],
                         indirect=True)
def test_a_trickling_models_endpoint_stops_at_the_request_timeout(server: FakeServer, tmp_path: Path) -> None:
    t = time.perf_counter()
    code, stdout, stderr, out = bench(server.url, tmp_path, "--concurrency", "1", "--request-timeout", "1")
    # the message names the 1 s deadline; the clock only guards against the server's 60 s trickle
    assert time.perf_counter() - t < HANG_GUARD_S
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "did not answer within 1 s" in lines[0], stderr
    assert not out.exists()  # nothing was measured


@pytest.mark.parametrize("server", [FakeServerConfig(ttft_s=0.01, itl_s=0.002)], indirect=True)
def test_each_load_point_is_saved_as_it_finishes(server: FakeServer, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure in a later load point (here: the second aggregate raises) keeps the first one on disk."""
    import sizing.measure.metrics as metrics

    real, calls = metrics.aggregate, []

    def flaky(*a: object, **kw: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the machine went away")
        return real(*a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(metrics, "aggregate", flaky)
    r = CliRunner().invoke(bench_app(), ["bench", server.url, "--stack", str(write_stack(tmp_path, output=3)),
                                         "--model", "fake-model", "--duration", "0.3", "--concurrency", "1",
                                         "--concurrency", "2", "--out", str(tmp_path / "r.json")], env=ENV)
    assert isinstance(r.exception, RuntimeError) and len(calls) == 2
    res = load_results(tmp_path / "r.json")
    assert [r.load for r in res.runs] == [1] and res.runs[0].completed > 0
    assert any("partial" in n for n in res.notes)
    assert not list(tmp_path.glob("*.tmp*"))  # written whole, then moved into place
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["kind"] == "llmcap-bench"
