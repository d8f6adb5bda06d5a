"""The smoke check (sizing/measure/smoke.py): `llmcap verify --smoke` and the deployment's smoke Job run
the same code, against a local fake OpenAI server; the Job carries it, awaited, on every bundled stack."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infra.kubernetes import router, smoke
from sizing.cli import app
from sizing.measure import smoke as smoke_check
from tests.fake_openai_server import FakeServer, FakeServerConfig
from tests.k8s_support import STACK_IDS, objects, rendered

KEY = "sk-smoke-test"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    s = FakeServer(FakeServerConfig(model="fake-model", api_key=KEY, ttft_s=0.0, itl_s=0.0)).start()
    yield s
    s.stop()


def test_check_asks_both_endpoints_and_reads_the_answer(server: FakeServer) -> None:
    answers = smoke_check.check(server.url, KEY, ["fake-model"], wait_s=0)
    assert [a.path for a in answers] == ["/v1/chat/completions", "/v1/completions"]
    assert all(a.text for a in answers)


def test_wrong_key_fails_at_once_with_one_line(server: FakeServer) -> None:
    with pytest.raises(smoke_check.SmokeFailure, match="HTTP 401") as e:
        smoke_check.check(server.url, "wrong", ["fake-model"], wait_s=30, pause_s=0.1)
    assert "\n" not in str(e.value)


def test_unknown_model_is_retried_until_the_deadline(server: FakeServer) -> None:
    with pytest.raises(smoke_check.SmokeFailure, match="not served before the deadline.*HTTP 404"):
        smoke_check.check(server.url, KEY, ["other-model"], wait_s=0.3, pause_s=0.1)


def test_nothing_listening_fails_within_the_deadline() -> None:
    with pytest.raises(smoke_check.SmokeFailure, match="not served before the deadline; last: no answer"):
        smoke_check.check("http://127.0.0.1:9", KEY, ["m"], wait_s=0.3, pause_s=0.1)


def test_the_job_script_runs_isolated_from_llmcap(server: FakeServer, tmp_path: Path) -> None:
    """The Job runs the module's text with `python3 -c` in the router's image: standard library only."""
    env = {"SMOKE_URL": server.url, "SMOKE_MODELS": '["fake-model"]', "SMOKE_WAIT_S": "5", "VLLM_API_KEY": KEY,
           "PATH": os.environ.get("PATH", "")}
    ok = subprocess.run([sys.executable, "-I", "-S", "-c", smoke.SCRIPT], env=env, cwd=tmp_path,
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("smoke: ok fake-model /v1/chat/completions")
    bad = subprocess.run([sys.executable, "-I", "-S", "-c", smoke.SCRIPT], env={**env, "VLLM_API_KEY": "x"},
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stdout.count("\n") == 1 and bad.stdout.startswith("smoke: FAIL HTTP 401")


def test_verify_smoke_cli(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMOKE_KEY", KEY)
    runner = CliRunner()
    ok = runner.invoke(app, ["verify", "--smoke", server.url, "--model", "fake-model", "--api-key-env", "SMOKE_KEY"])
    assert ok.exit_code == 0, ok.output
    assert ok.output.startswith("smoke: ok fake-model /v1/chat/completions")
    bad = runner.invoke(app, ["verify", "--smoke", server.url, "--model", "nope", "--api-key-env", "SMOKE_KEY"])
    assert bad.exit_code == 1 and "HTTP 404" in bad.output and "Traceback" not in bad.output
    usage = runner.invoke(app, ["verify", "--smoke", "ftp://x", "--model", "m"])
    assert usage.exit_code == 2 and "--smoke" in usage.output


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_every_stack_ends_with_an_awaited_smoke_job(stack_id: str) -> None:
    result, _ = rendered(stack_id)
    plan = result.plan
    job = next(o for o in objects(stack_id) if o["kind"] == "Job" and o["metadata"]["name"] == smoke.NAME)
    annotations = job["metadata"].get("annotations") or {}
    assert annotations.get("pulumi.com/skipAwait") != "true", stack_id
    c = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert c["command"][:2] == ["python3", "-c"] and c["command"][2] == smoke.SCRIPT
    assert env["SMOKE_URL"].startswith(f"http://{router.NAME}.")
    assert env["SMOKE_MODELS"] and all(p.vllm.served_model_name in env["SMOKE_MODELS"] for p in plan.pools)
    wait = int(env["SMOKE_WAIT_S"])
    assert job["spec"]["activeDeadlineSeconds"] > wait > 0


def test_the_router_is_ready_only_with_a_model() -> None:
    probe = router.deployment("llmcap")["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    script = probe["exec"]["command"][-1]
    assert "/v1/models" in script and "d.get('data')" in script
