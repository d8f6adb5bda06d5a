"""Golden files of `llmcap diff` (markdown comment and JSON) from saved plan pairs (--from/--to).

Rewrite with `pytest --update-golden` (or LLMCAP_UPDATE_GOLDEN=1) and review the diff."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.plan import Plan
from tests.diff_support import LLAMA_70B, cli_app, l4_plan, plan_of, priced_pool
from tests.golden_files import GOLDEN_DIR, check_golden

ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def _a100(users: int = 100) -> Plan:
    return plan_of([priced_pool("p4de.24xlarge", "A100-80GB", 8, 1, 1)], users)


def _70b() -> Plan:
    return plan_of([priced_pool("p4de.24xlarge", "A100-80GB", 8, 4, 2, model=LLAMA_70B, precision="fp16")], 100,
                   model=LLAMA_70B)


def _comment_only() -> Plan:
    return l4_plan()


CASES: dict[str, tuple[Callable[[], Plan | None], Callable[[], Plan | None]]] = {
    "stack_added": (lambda: None, lambda: l4_plan(stack="staging")),
    "stack_removed": (lambda: l4_plan(stack="staging"), lambda: None),
    "users_doubled": (lambda: l4_plan(100), lambda: l4_plan(200)),
    "model_8b_to_70b": (lambda: l4_plan(), _70b),
    "gpus_l4_to_a100": (lambda: l4_plan(), _a100),
    "no_cost_change": (lambda: l4_plan(), _comment_only),
}


def run_diff(tmp_path: Path, before: Plan | None, after: Plan | None, *extra: str) -> tuple[int, str]:
    args = ["diff"]
    if before is not None:
        (tmp_path / "before.json").write_text(before.to_json())
        args += ["--from", str(tmp_path / "before.json")]
    if after is not None:
        (tmp_path / "after.json").write_text(after.to_json())
        args += ["--to", str(tmp_path / "after.json")]
    r = CliRunner().invoke(cli_app(), args + list(extra), env=ENV)
    return r.exit_code, r.output


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str, tmp_path: Path, update_golden: bool) -> None:
    before, after = (f() for f in CASES[case])
    code, md = run_diff(tmp_path, before, after, "--format", "markdown")
    assert code == 0, md
    code, js = run_diff(tmp_path, before, after, "--format", "json")
    assert code == 0, js
    check_golden(GOLDEN_DIR / "diff" / case / "comment.md", md, update_golden)
    check_golden(GOLDEN_DIR / "diff" / case / "diff.json", js, update_golden)


def test_statuses_and_signs(tmp_path: Path) -> None:
    expect = {"stack_added": ("added", 1), "stack_removed": ("removed", -1), "users_doubled": ("modified", 1),
              "model_8b_to_70b": ("modified", 1), "gpus_l4_to_a100": ("modified", 1),
              "no_cost_change": ("unchanged", 0)}
    for case, (status, sign) in expect.items():
        before, after = (f() for f in CASES[case])
        _, js = run_diff(tmp_path, before, after, "--format", "json")
        d = json.loads(js)
        (s,) = d["stacks"]
        assert s["status"] == status, case
        delta = s["delta_usd_per_month"]
        assert (delta > 0) - (delta < 0) == sign, (case, delta)
        assert d["total_delta_usd_per_month"] == pytest.approx(delta)
        before_m = s["before"]["usd_per_month"] if s["before"] else 0.0
        after_m = s["after"]["usd_per_month"] if s["after"] else 0.0
        assert delta == pytest.approx(after_m - before_m, abs=0.01)
        if status in ("modified", "unchanged"):
            assert s["delta_percent"] == pytest.approx(100 * delta / before_m, abs=0.01)


def test_headlines(tmp_path: Path) -> None:
    _, md = run_diff(tmp_path, l4_plan(100), l4_plan(200))
    assert "Monthly cost will rise by $" in md and "(+" in md
    _, md = run_diff(tmp_path, l4_plan(200), l4_plan(100))
    assert "Monthly cost will fall by $" in md and "(-" in md
    _, md = run_diff(tmp_path, l4_plan(), l4_plan())
    assert "No cost change." in md and "rise" not in md and "fall" not in md


def test_markdown_folds_details_and_names_cost_lines(tmp_path: Path) -> None:
    _, md = run_diff(tmp_path, l4_plan(), _a100())
    assert md.startswith("<!-- llmcap-cost-diff -->")
    assert md.count("<details>") == md.count("</details>") == 1
    assert "GPU instances (on-demand, g6.12xlarge)" in md and "GPU instances (on-demand, p4de.24xlarge)" in md
    assert "g6.12xlarge → p4de.24xlarge" in md


def test_gates(tmp_path: Path) -> None:
    code, out = run_diff(tmp_path, l4_plan(100), l4_plan(200), "--fail-above-percent", "10")
    assert code == 1 and "above --fail-above-percent 10%" in out
    code, _ = run_diff(tmp_path, l4_plan(100), l4_plan(200), "--fail-above-percent", "500")
    assert code == 0
    after = l4_plan(200)
    code, out = run_diff(tmp_path, l4_plan(100), after, "--budget-usd-month",
                         str(after.totals.all_in_usd_per_month - 1))
    assert code == 1 and "above --budget-usd-month" in out
    code, _ = run_diff(tmp_path, l4_plan(100), after, "--budget-usd-month", str(after.totals.all_in_usd_per_month + 1))
    assert code == 0
    code, _ = run_diff(tmp_path, l4_plan(200), l4_plan(100), "--fail-above-percent", "0")
    assert code == 0  # a saving never trips the gate


def test_out_file_and_bad_inputs(tmp_path: Path) -> None:
    out = tmp_path / "c" / "cost-diff.md"
    code, text = run_diff(tmp_path, l4_plan(100), l4_plan(200), "--out", str(out))
    assert code == 0 and out.read_text() == text
    code, text = run_diff(tmp_path, None, None)
    assert code == 2 and "--base" in text
    (tmp_path / "bad.json").write_text("{}")
    r = CliRunner().invoke(cli_app(), ["diff", "--from", str(tmp_path / "bad.json"), "--to",
                                       str(tmp_path / "bad.json")], env=ENV)
    assert r.exit_code == 2 and "not a Plan JSON" in r.output


def test_table_format(tmp_path: Path) -> None:
    code, out = run_diff(tmp_path, l4_plan(100), l4_plan(200), "--format", "table")
    assert code == 0
    assert out.splitlines()[0].startswith("Monthly cost will rise by $")
    assert "modified" in out and "dev" in out and "<details>" not in out
    assert max(len(line) for line in out.splitlines()) <= 120


def test_diff_modules_do_not_import_pulumi_or_boto3() -> None:
    import subprocess
    import sys

    code = ("import sys, sizing.analysis.diff, sizing.report.diff_views, sizing.cli.diff_cmd, sizing.cost.resources; "
            "from sizing.cost.resources import registry; registry(); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_aws', 'boto3', 'botocore')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_golden_infeasible_side(update_golden: bool) -> None:
    """GPUs restricted so that the head cannot meet the SLO: reported with its reason, not priced."""
    from sizing.analysis.diff import build_diff, side_from_plan, side_unplanned, stack_diff
    from sizing.errors import NoFeasiblePlanError
    from sizing.report.diff_views import render_json, render_markdown

    err = NoFeasiblePlanError("no feasible plan", ["L4: misses-itl: ITL p95 31.2 ms > SLO 10 ms at 1 request"])
    sd = stack_diff("dev", "stacks/Pulumi.dev.yaml", side_from_plan(l4_plan(), "origin/main"),
                    side_unplanned("working tree", err))
    d = build_diff("origin/main", "working tree", [sd])
    assert sd.delta_usd_per_month is None and d.stacks_not_priced == ["dev"] and d.total_delta_usd_per_month == 0
    md = render_markdown(d)
    assert "not priced" in md and "infeasible: L4: misses-itl" in md and "| $0 |" not in md
    check_golden(GOLDEN_DIR / "diff" / "head_infeasible" / "comment.md", md, update_golden)
    check_golden(GOLDEN_DIR / "diff" / "head_infeasible" / "diff.json", render_json(d), update_golden)
