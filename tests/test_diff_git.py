"""`llmcap diff --base REF` end to end on a real temporary git repository, with the real planner.
Assertions are behaviour (statuses, signs of deltas), not numbers, so recalibration cannot break them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.diff_support import DIFF_ENV, git, init_repo, run_diff
from tests.isolation import no_local_data

STACKS = Path(__file__).resolve().parents[1] / "stacks"
ENV = DIFF_ENV
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "stacks").mkdir(parents=True)
    init_repo(r)
    dev = (STACKS / "Pulumi.dev.yaml").read_text()
    for name in ("dev", "prod", "old"):
        (r / "stacks" / f"Pulumi.{name}.yaml").write_text(dev)
    (r / "README.md").write_text("not a stack\n")
    commit_all(r, "base")
    return r


run = run_diff


def test_commit_to_commit(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stacks = repo / "stacks"
    dev = stacks / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("concurrent_users: 100", "concurrent_users: 200"))
    prod = stacks / "Pulumi.prod.yaml"
    prod.write_text("# only a comment changed\n" + prod.read_text())
    (stacks / "Pulumi.old.yaml").unlink()
    # not dev's text (that would be a rename of old): a stack of its own
    shutil.copy(STACKS / "Pulumi.scaleout-l4.yaml", stacks / "Pulumi.staging.yaml")
    (repo / "README.md").write_text("changed, but not a stack\n")
    commit_all(repo, "change")

    code, out = run(repo, monkeypatch, "--base", "HEAD~1", "--head", "HEAD", "--format", "json")
    assert code == 0, out
    d = json.loads(out)
    by = {s["stack"]: s for s in d["stacks"]}
    assert set(by) == {"dev", "prod", "old", "staging"}
    assert by["dev"]["status"] == "modified" and by["dev"]["delta_usd_per_month"] > 0
    assert by["dev"]["after"]["concurrent_users"] == 2 * by["dev"]["before"]["concurrent_users"]
    assert by["prod"]["status"] == "unchanged" and by["prod"]["delta_usd_per_month"] == 0
    assert by["old"]["status"] == "removed" and by["old"]["after"] is None
    assert by["old"]["delta_usd_per_month"] == -by["old"]["before"]["usd_per_month"]
    assert by["staging"]["status"] == "added" and by["staging"]["before"] is None
    assert by["staging"]["delta_usd_per_month"] == by["staging"]["after"]["usd_per_month"] > 0
    assert d["total_delta_usd_per_month"] == pytest.approx(sum(s["delta_usd_per_month"] for s in d["stacks"]))
    assert d["stacks_not_priced"] == []

    code, md = run(repo, monkeypatch, "--base", "HEAD~1", "--head", "HEAD")
    assert code == 0 and md.startswith("<!-- llmcap-cost-diff -->")
    assert "Monthly cost will rise by $" in md or "Monthly cost will fall by $" in md
    assert md.count("<details>") == 4 and "GPU instances (on-demand, " in md


def test_working_tree_against_head(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = run(repo, monkeypatch, "--base", "HEAD")
    assert code == 0 and "No stack files changed: no cost change." in out
    dev = repo / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("concurrent_users: 100", "concurrent_users: 200"))
    code, out = run(repo, monkeypatch, "--base", "HEAD", "--format", "json", "--stacks", "stacks/Pulumi.dev.yaml")
    d = json.loads(out)
    assert code == 0 and [s["stack"] for s in d["stacks"]] == ["dev"] and d["head"] == "working tree"
    assert d["stacks"][0]["delta_usd_per_month"] > 0
    code, out = run(repo, monkeypatch, "--base", "HEAD", "--fail-above-percent", "1")
    assert code == 1 and "above --fail-above-percent 1%" in out


def test_infeasible_side_is_reported_not_a_crash(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dev = repo / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("itl_p95_ms: 25", "itl_p95_ms: 2.2"))
    bad = repo / "stacks" / "Pulumi.prod.yaml"
    bad.write_text("config:\n  llmcap:workload: {model: nope-model}\n")
    code, out = run(repo, monkeypatch, "--base", "HEAD", "--format", "json")
    assert code == 0, out
    by = {s["stack"]: s for s in json.loads(out)["stacks"]}
    assert by["dev"]["after"]["planned"] is False and by["dev"]["after"]["reason"].startswith("infeasible: ")
    assert by["dev"]["delta_usd_per_month"] is None
    assert by["prod"]["after"]["reason"].startswith("invalid: ")
    code, md = run(repo, monkeypatch, "--base", "HEAD")
    assert "Cost change not priced: dev, prod could not be planned" in md and "not priced" in md
    assert "$0 " not in md.split("\n")[3]


def test_bad_ref_and_not_a_repo(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = run(repo, monkeypatch, "--base", "no-such-ref")
    assert code == 2 and "'no-such-ref' is not a commit" in out
    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    code, out = run(elsewhere, monkeypatch, "--base", "HEAD")
    assert code == 2 and out.startswith("error: git rev-parse")


def test_glob_star_stays_in_one_folder(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nested = repo / "stacks" / "Pulumi.x"
    nested.mkdir()
    (nested / "y.yaml").write_text("not: a stack\n")
    commit_all(repo, "nested file")
    (nested / "y.yaml").write_text("still: not a stack\n")
    code, out = run(repo, monkeypatch, "--base", "HEAD", "--format", "json")
    assert code == 0 and json.loads(out)["stacks"] == []


def test_a_stack_over_its_own_budget_fails_the_gate(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dev = repo / "stacks" / "Pulumi.dev.yaml"
    text = dev.read_text().replace("concurrent_users: 100", "concurrent_users: 200")
    dev.write_text(text + "  llmcap:budget_usd_month: 1000000\n")
    code, out = run(repo, monkeypatch, "--base", "HEAD", "--stacks", "stacks/Pulumi.dev.yaml")
    assert code == 0, out
    dev.write_text(text + "  llmcap:budget_usd_month: 5000\n")
    code, out = run(repo, monkeypatch, "--base", "HEAD", "--stacks", "stacks/Pulumi.dev.yaml")
    assert code == 1
    assert "stack dev: $" in out and "above its llmcap:budget_usd_month $5,000" in out


@pytest.mark.slow  # plans (and renders) both sides of a real git repository: about 1-2 CPU s
def test_render_prices_every_resource_of_the_changed_stack(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dev = repo / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("concurrent_users: 100", "concurrent_users: 200"))
    code, out = run(repo, monkeypatch, "--base", "HEAD", "--stacks", "stacks/Pulumi.dev.yaml", "--render",
                    "--format", "json")
    assert code == 0, out
    lines = json.loads(out)["stacks"][0]["after"]["resources"]
    names = [ln["name"] for ln in lines]
    assert any(n.startswith("GPU instances (on-demand, ") for n in names), names
    assert any("NAT" in n for n in names) and any("EKS" in n for n in names), names
    for ln in lines:  # every line is priced or says so; never a silent $0
        assert ln["usd_per_month"] is None or ln["usd_per_month"] > 0 or ln.get("quantity") == 0, ln


# --- issue 18 item 6: a head that cannot be priced fails the gate; renames ---------------------------

@pytest.mark.slow  # plans (and renders) both sides of a real git repository: about 1-2 CPU s
def test_a_head_that_cannot_be_planned_fails_the_gate_with_its_reason(repo: Path, monkeypatch: pytest.MonkeyPatch
                                                                      ) -> None:
    dev = repo / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("itl_p95_ms: 25", "itl_p95_ms: 2.2"))
    bad = repo / "stacks" / "Pulumi.prod.yaml"
    bad.write_text("config:\n  llmcap:workload: {model: nope-model}\n")
    code, md = run(repo, monkeypatch, "--base", "HEAD", "--fail-above-percent", "0", "--budget-usd-month", "1")
    assert code == 1, md
    assert "- ❌ **Gate failed:** stack dev cannot be priced at working tree (infeasible: " in md
    assert "- ❌ **Gate failed:** stack prod cannot be priced at working tree (invalid: " in md
    assert "error: stack dev cannot be priced at working tree" in md
    # without a gate the comment still says why, and nothing fails
    code, md = run(repo, monkeypatch, "--base", "HEAD")
    assert code == 0 and "Gate failed" not in md and "could not be planned" in md


@pytest.mark.slow  # plans (and renders) both sides of a real git repository: about 1-2 CPU s
def test_a_renamed_stack_file_is_a_rename(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git(repo, "mv", "stacks/Pulumi.old.yaml", "stacks/Pulumi.staging.yaml")
    code, out = run(repo, monkeypatch, "--base", "HEAD", "--format", "json")
    assert code == 0, out
    (s,) = json.loads(out)["stacks"]
    assert (s["stack"], s["status"], s["renamed_from"], s["path"]) == (
        "staging", "renamed", "stacks/Pulumi.old.yaml", "stacks/Pulumi.staging.yaml")
    assert s["delta_usd_per_month"] == 0 and s["before"]["usd_per_month"] > 0
    code, md = run(repo, monkeypatch, "--base", "HEAD")
    assert "(`stacks/Pulumi.old.yaml` → `stacks/Pulumi.staging.yaml`): renamed" in md
    # renamed and edited a little: still a rename, with the cost change
    staging = repo / "stacks" / "Pulumi.staging.yaml"
    staging.write_text(staging.read_text().replace("concurrent_users: 100", "concurrent_users: 150"))
    code, out = run(repo, monkeypatch, "--base", "HEAD", "--format", "json")
    (s,) = json.loads(out)["stacks"]
    assert s["status"] == "renamed" and s["delta_usd_per_month"] > 0


# --- issue 14 item 7: saved plans are what a diff compares ----------------------------------------------

def write_plans(repo: Path, monkeypatch: pytest.MonkeyPatch, *names: str, catalog: Path | None = None) -> None:
    from sizing.cli import app

    monkeypatch.chdir(repo)
    no_local_data(monkeypatch, repo.parent)
    for n in names:
        extra = ["--catalog", str(catalog)] if catalog else []
        r = CliRunner().invoke(app, ["plan", f"stacks/Pulumi.{n}.yaml", "--write", *extra], env=ENV)
        assert r.exit_code == 0, r.output


@pytest.mark.slow  # plans (and renders) both sides of a real git repository: about 1-2 CPU s
def test_saved_plans_are_compared_when_the_refs_have_them(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    from sizing.catalog.paths import BUNDLED_DIR

    write_plans(repo, monkeypatch, "dev", "prod")
    commit_all(repo, "saved plans")
    # a new plan written after a catalog refresh (prices doubled): the stack file itself is unchanged
    cache = tmp_path / "refreshed"
    cache.mkdir()
    rows = (BUNDLED_DIR / "prices.csv").read_text().splitlines()
    head, body = rows[0], rows[1:]
    col = head.split(",").index("usd_per_hour")

    def doubled(line: str) -> str:
        cells = line.split(",")
        cells[col] = f"{float(cells[col]) * 2:.4f}"
        return ",".join(cells)

    (cache / "prices.csv").write_text("\n".join([head, *map(doubled, body)]) + "\n")
    write_plans(repo, monkeypatch, "dev", catalog=cache)
    prod = repo / "stacks" / "Pulumi.prod.yaml"
    prod.write_text(prod.read_text().replace("concurrent_users: 100", "concurrent_users: 200"))  # plan not rewritten
    old = repo / "stacks" / "Pulumi.old.yaml"
    old.write_text(old.read_text().replace("concurrent_users: 100", "concurrent_users: 200"))  # never had a plan

    code, out = run(repo, monkeypatch, "--base", "HEAD", "--format", "json")
    assert code == 0, out
    by = {s["stack"]: s for s in json.loads(out)["stacks"]}
    dev = by["dev"]
    assert dev["status"] == "modified" and dev["delta_usd_per_month"] > 0
    assert dev["before"]["plan_source"] == dev["after"]["plan_source"] == "saved"
    assert dev["after"]["plan_file"] == "stacks/Pulumi.dev.plan.json"
    assert by["prod"]["after"]["planned"] is False and by["prod"]["after"]["plan_source"] == "saved"
    assert by["prod"]["after"]["reason"] == ("stale saved plan: stacks/Pulumi.prod.yaml changed since its saved "
                                             "plan: run llmcap plan stacks/Pulumi.prod.yaml --write and review the "
                                             "diff")
    assert by["old"]["before"]["plan_source"] == by["old"]["after"]["plan_source"] == "re-planned"

    code, md = run(repo, monkeypatch, "--base", "HEAD")
    assert "| plan | saved `stacks/Pulumi.dev.plan.json` | saved `stacks/Pulumi.dev.plan.json` |" in md
    assert "re-planned here (no saved plan at this ref)" in md
    code, md = run(repo, monkeypatch, "--base", "HEAD", "--budget-usd-month", "1000000000")
    assert code == 1 and "stack prod cannot be priced at working tree (stale saved plan: " in md


def test_an_infeasible_head_with_its_own_budget_fails_that_gate(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dev = repo / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("itl_p95_ms: 25", "itl_p95_ms: 2.2") + "  llmcap:budget_usd_month: 50000\n")
    code, md = run(repo, monkeypatch, "--base", "HEAD", "--stacks", "stacks/Pulumi.dev.yaml")
    assert code == 1 and "Gate failed:** stack dev cannot be priced at working tree (infeasible: " in md
