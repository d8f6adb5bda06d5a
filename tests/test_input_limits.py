"""Input limits enforced where input enters (issue 27, item 5): targets below what any deployment can
do, control characters in names and paths, unknown keys and type errors answered in the user's words.
Each case was a traceback, a silent pass or a Python class name before."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.cli import app

runner = CliRunner()
STACK = """\
config:
  aws:region: us-east-1
  llmcap:workload:
    model: {model}
    precision: fp8
    prompt_tokens: {prompt}
    output_tokens: 512
    traffic:
      {traffic}
    slo:
      {slo}
"""


def _stack(tmp_path: Path, *, model: str = "meta-llama/Meta-Llama-3-8B-Instruct", prompt: str = "1024",
           traffic: str = "concurrent_users: 40", slo: str = "{ttft_p95_ms: 1000, itl_p95_ms: 50}") -> Path:
    p = tmp_path / "Pulumi.t.yaml"
    p.write_text(STACK.format(model=model, prompt=prompt, traffic=traffic, slo=slo))
    return p


def _run(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return r.exit_code, r.output


@pytest.mark.parametrize(("slo", "where"), [
    ("{ttft_p95_ms: 0.001, itl_p95_ms: 50}", "llmcap:workload.slo.ttft.p95: 0.001 ms is below one engine step"),
    ("{ttft_p95_ms: 1000, itl_p95_ms: 0.001}", "llmcap:workload.slo.itl.p95: 0.001 ms is below one engine step"),
    ("{ttft_p95_ms: 1000, itl_p95_ms: 2}", "llmcap:workload.slo.itl.p95: 2 ms is below one engine step"),
    ("{e2e: {p99: 1}}", "llmcap:workload.slo.e2e.p99: 1 ms is below two engine steps"),
])
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_a_target_below_one_engine_step_is_refused_with_the_bound(tmp_path: Path, slo: str, where: str,
                                                                  command: str) -> None:
    code, out = _run(command, str(_stack(tmp_path, slo=slo)))
    assert code == 2, out
    from sizing.catalog.lookup import load_catalog
    from sizing.humanize import num

    # the floor is one step's fitted CPU overhead (two for E2E), read from the bundled calibration
    step_ms = load_catalog().calibration.overhead_s("vllm") * 1000.0 * (2 if "e2e" in where else 1)
    assert where in out and f"raise it to at least {num(step_ms)} ms" in out
    assert "Traceback" not in out and "Error:" not in out


def test_a_rate_per_user_beyond_one_token_per_step_is_refused_and_one_beyond_the_itl_warned(tmp_path: Path) -> None:
    code, out = _run("validate", str(_stack(tmp_path, traffic="{concurrent_users: 40, tokens_per_s_per_user: 1000}")))
    assert code == 2 and "tokens_per_s_per_user: 1,000 tokens/s is above one token per engine step" in out, out
    code, out = _run("validate", str(_stack(tmp_path, traffic="{concurrent_users: 40, tokens_per_s_per_user: 40}")))
    assert code == 0 and "the per-token target allows 50 ms, so the plan meets the target, not this rate" in out, out


@pytest.mark.parametrize("model", ['"/tmp/a\\0b/config.json"', '"org\\x07/model\\x1b[31m"'])
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_control_characters_in_a_model_name_or_path_are_one_error_line(tmp_path: Path, model: str,
                                                                       command: str) -> None:
    code, out = _run(command, str(_stack(tmp_path, model=model)))
    assert code == 2, out
    assert out.startswith("error: llmcap:workload.model: contains the control character"), out
    assert "Traceback" not in out and "embedded null byte" not in out


def test_an_unknown_key_gets_the_closest_known_key(tmp_path: Path) -> None:
    code, out = _run("validate", str(_stack(tmp_path, traffic="concurent_users: 40")))
    assert code == 2 and "llmcap:workload.traffic.concurent_users: unknown key; did you mean concurrent_users?" in out
    code, out = _run("validate", str(_stack(tmp_path, slo="{ttft: {p95: 1000}, itl: {p955: 50}}")))
    assert code == 2 and "llmcap:workload.slo.itl.p955: unknown key; did you mean p95?" in out, out


@pytest.mark.parametrize("prompt", ["abc", "[1, 2]"])
def test_no_python_class_name_reaches_the_user(tmp_path: Path, prompt: str) -> None:
    code, out = _run("validate", str(_stack(tmp_path, prompt=prompt)))
    assert code == 2 and "llmcap:workload.prompt_tokens: Input should be a token count" in out, out
    assert "TokenLength" not in out and "instance of" not in out
