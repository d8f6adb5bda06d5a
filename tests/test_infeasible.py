"""Infeasible answers: one line per cause, and the cheapest nearby changes that work, each re-planned
and priced; `plan --format json` prints a JSON object on stdout with exit 3."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sizing.cli import app

ROOT = Path(__file__).resolve().parents[1]
DEV = str(ROOT / "stacks" / "Pulumi.dev.yaml")
L70 = str(ROOT / "stacks" / "Pulumi.llama70b.yaml")


def _run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})
    return r.exit_code, r.stdout, r.stderr


def _sets(setting: dict[str, Any]) -> list[str]:
    out = []
    for k, v in setting.items():
        out += ["--set", f"{k}={json.dumps(v)}"]
    return out


CASES = {
    "70b-on-l4-only": (L70, ["--set", "hardware.gpus=[L4]"]),
    "8b-fp16-l4-itl-15": (DEV, ["--set", "hardware.gpus=[L4]", "--set", "workload.precision=fp16",
                                "--set", "workload.slo.itl_p95_ms=15"]),
    "awq-without-checkpoint": (DEV, ["--set", "workload.precision=int4-awq", "--set", "workload.checkpoints={}"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_json_infeasible_and_every_suggestion_replans_at_its_price(case: str) -> None:
    stack, args = CASES[case]
    code, out, err = _run("plan", stack, *args, "--format", "json")
    assert code == 3, err
    doc = json.loads(out)
    assert doc["feasible"] is False and doc["rejections"] and doc["problems"]
    assert doc["suggestions"], doc
    for s in doc["suggestions"]:
        assert s["usd_per_month"] > 0 and s["plan"]
        c2, out2, err2 = _run("plan", stack, *args, *_sets(s["set"]), "--format", "json")
        assert c2 == 0, (s, err2)
        plan = json.loads(out2)
        assert plan["totals"]["usd_per_month"] == pytest.approx(s["usd_per_month"], rel=1e-6), s


def test_suggestions_stay_nearby() -> None:
    code, out, _ = _run("plan", L70, "--set", "hardware.gpus=[T4]", "--set", "workload.precision=fp16",
                        "--format", "json")
    assert code == 3
    doc = json.loads(out)
    costs = [s["usd_per_month"] for s in doc["suggestions"]]
    assert costs == sorted(costs)
    for s in doc["suggestions"]:
        assert s["usd_per_month"] <= 3 * costs[0] and s["usd_per_month"] <= 1_000_000
        if "workload.slo.itl" in s["set"]:
            assert max(s["set"]["workload.slo.itl"].values()) <= 200


def test_checkpoint_cause_is_one_line_and_datasheet_gaps_are_condensed() -> None:
    code, out, err = _run("plan", DEV, *CASES["awq-without-checkpoint"][1])
    assert code == 3 and out == ""
    lines = [x for x in err.splitlines() if not x.startswith("error: to make it feasible")]
    assert sum("needs a pre-quantized checkpoint" in x for x in lines) == 1
    assert sum("no datasheet" in x for x in lines) == 1
    assert "B300" in err and "RTX PRO 4500" in err
    assert "int4-awq with a pre-quantized checkpoint" in err


def test_context_beyond_the_model_limit_is_its_own_cause() -> None:
    code, out, err = _run("plan", DEV, "--set", "workload.prompt_tokens=9000")
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0
    assert "8,192-token context" in err and "prompt_tokens" in err


def test_a_costlier_change_than_a_few_times_the_cheapest_is_counted_not_shown() -> None:
    """Issue 27: 405B held to A10G at bf16 suggested H100s at $160,717/month and a 4-bit fleet at $951,219."""
    code, out, err = _run("plan", str(ROOT / "stacks" / "Pulumi.llama405b.yaml"), "--set", "hardware.gpus=[A10G]",
                          "--set", "workload.precision=bf16")
    assert code == 3
    shown = [ln for ln in err.splitlines() if ln.startswith("error: to make it feasible: ")]
    costs = [float(ln.rsplit("$", 1)[1].split("/")[0].replace(",", "")) for ln in shown if "/month" in ln
             and "not shown" not in ln]
    assert costs and max(costs) <= 3 * min(costs), shown
    assert any("costlier change(s) over $" in ln and "not shown" in ln for ln in shown), shown
