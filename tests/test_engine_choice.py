"""The choice between engines (llmcap:workload.engine as a list): the cheapest all-in plan wins, ties go to
the higher goodput per replica, an engine without a feasible plan is listed with why, and when no engine
has one the first engine's infeasibility is the error."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sizing.errors import NoFeasiblePlanError
from sizing.planning.engine_choice import choose
from sizing.planning.planner import plan_stack
from sizing.spec import WorkloadSpec
from sizing.stack import load_stack
from tests.plan_factory import make_plan, make_pool

ROOT = Path(__file__).resolve().parents[1]
BOTH = WorkloadSpec.model_validate({"model": "m", "prompt_tokens": 10, "output_tokens": 10,
                                    "traffic": {"concurrent_users": 1}, "engine": ["vllm", "sglang"]})


def _plan(engine: str, price: float, goodput: float = 900.0):  # type: ignore[no-untyped-def]
    pool = make_pool(usd_per_instance_hour=price).model_copy(update={"engine": engine})
    pool = pool.model_copy(update={"per_replica": pool.per_replica.model_copy(
        update={"goodput_output_tokens_per_s": goodput})})
    return make_plan(pools=[pool])


def test_the_cheaper_engine_is_chosen_and_the_other_says_by_how_much() -> None:
    plan = choose(BOTH, {"vllm": _plan("vllm", 5.0), "sglang": _plan("sglang", 4.0)}, {})
    assert {p.engine for p in plan.pools} == {"sglang"} and plan.workload == BOTH
    rows = {e.engine: e for e in plan.engines}
    assert rows["sglang"].chosen and not rows["vllm"].chosen
    assert "cheapest" in rows["sglang"].why and "dearer all-in than sglang" in rows["vllm"].why
    assert rows["vllm"].all_in_usd_per_month is not None and rows["sglang"].all_in_usd_per_month is not None
    assert rows["vllm"].all_in_usd_per_month > rows["sglang"].all_in_usd_per_month
    assert any("engines compared: vllm, sglang; sglang chosen" in a for a in plan.assumptions)


def test_a_tie_goes_to_the_higher_goodput() -> None:
    plan = choose(BOTH, {"vllm": _plan("vllm", 5.0, 800.0), "sglang": _plan("sglang", 5.0, 950.0)}, {})
    assert [e.engine for e in plan.engines if e.chosen] == ["sglang"]
    assert "tied" in next(e.why for e in plan.engines if e.engine == "vllm")


def test_an_engine_without_a_feasible_plan_is_listed_with_why() -> None:
    err = NoFeasiblePlanError("no plan", ["L4: misses the ITL target"])
    plan = choose(BOTH, {"vllm": _plan("vllm", 5.0)}, {"sglang": err})
    rows = {e.engine: e for e in plan.engines}
    assert rows["vllm"].chosen and rows["vllm"].why == "the only engine with a feasible plan"
    assert not rows["sglang"].feasible and "misses the ITL target" in rows["sglang"].why
    assert rows["sglang"].usd_per_month is None


def test_no_engine_feasible_raises_the_first_engines_reasons() -> None:
    # above the engine-step floor
    stack = load_stack(ROOT / "stacks" / "Pulumi.engines.yaml", ["workload.slo.itl_p95_ms=2.2"])
    with pytest.raises(NoFeasiblePlanError):
        plan_stack(replace(stack), goodput_scale=None)


def test_a_switch_of_engine_shows_in_the_cost_diff() -> None:
    from sizing.analysis.diff import diff_plans

    d = diff_plans(_plan("vllm", 5.0), _plan("sglang", 5.0), "main", "pr")
    s = d.stacks[0]
    assert s.before is not None and s.after is not None
    assert not any("sglang" in p for p in s.before.pools) and any(p.endswith(", sglang)") for p in s.after.pools)
    assert s.status != "unchanged"


def test_compare_tells_two_engines_apart() -> None:
    from typer.testing import CliRunner

    from sizing.cli import app

    stacks = [str(ROOT / "stacks" / f"Pulumi.{s}.yaml") for s in ("dev", "sglang")]
    r = CliRunner().invoke(app, ["compare", *stacks, "--format", "json"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    pools = [o["pools"] for o in doc["options"]]
    assert not any("sglang" in p for p in pools[0]) and all(p.endswith(", sglang)") for p in pools[1])
