"""A saved plan is what the planner said, or it is refused (issue 32 part 4).

`llmcap plan --write` seals the saved plan with a digest over its body; `render`, the Pulumi program
(`require_saved_plan`, what infra/__main__.py calls) and `llmcap diff` check it, and check the plan's
own figures (finite, not negative, replicas, instances, GPUs and dollars that add up), so a plan edited
by hand (10x the replicas), NaN or negative is refused with one line, and the diff's gates fail closed."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sizing.cost.money import HOURS_PER_MONTH
from sizing.planning.plan_integrity import body_digest, plan_problems
from sizing.planning.saved_plan import (
    SavedPlan,
    SavedPlanRefusedError,
    parse_saved_plan,
    require_saved_plan,
)
from sizing.stack import load_stack
from tests.isolation import no_local_data

ROOT = Path(__file__).resolve().parents[1]
STACKS = ROOT / "stacks"
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
HINT = "run llmcap plan stacks/Pulumi.dev.yaml --write and review the diff"


def cli(*args: str) -> tuple[int, str]:
    from sizing.cli import app

    r = CliRunner().invoke(app, list(args), env=ENV)
    return r.exit_code, r.output


def doc_of(name: str = "dev") -> dict[str, Any]:
    return json.loads((STACKS / f"Pulumi.{name}.plan.json").read_text())


def ten_times_the_replicas(doc: dict[str, Any]) -> None:
    """What a hand edit that wants 10x the capacity changes: the pool's replicas and nodes."""
    pool = doc["plan"]["pools"][0]
    for key in ("replicas", "instances_min", "instances_desired"):
        pool[key] *= 10
    pool["instances_max"] = max(pool["instances_max"], pool["instances_desired"])


def resealed(doc: dict[str, Any]) -> dict[str, Any]:
    """The edit with its digest recomputed, as someone who read this code could do."""
    return {**doc, "digest": body_digest(doc)}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(STACKS, tmp_path / "stacks")
    monkeypatch.chdir(tmp_path)
    no_local_data(monkeypatch, tmp_path)
    return tmp_path


# --- the bundled saved plans are sealed and consistent --------------------------------------------

@pytest.mark.parametrize("path", sorted(STACKS.glob("*.plan.json")), ids=lambda p: p.name)
def test_every_bundled_saved_plan_is_sealed_and_adds_up(path: Path) -> None:
    doc = json.loads(path.read_text())
    assert doc["digest"] == body_digest(doc), f"{path.name}: run bash scripts/write_plans.sh"
    saved = parse_saved_plan(path.read_text(), path.name, "stack")
    assert plan_problems(saved.plan, HOURS_PER_MONTH) == []


# --- render refuses a hand-edited plan ------------------------------------------------------------

def test_render_refuses_ten_times_the_replicas_in_one_line(project: Path) -> None:
    plan_file = project / "stacks" / "Pulumi.dev.plan.json"
    doc = json.loads(plan_file.read_text())
    ten_times_the_replicas(doc)
    plan_file.write_text(json.dumps(doc, indent=2))
    code, out = cli("render", "stacks/Pulumi.dev.yaml", "--out", "out")
    assert code == 2, out
    assert out.splitlines() == [
        f"error: stacks/Pulumi.dev.plan.json: edited since llmcap plan --write (its digest does not match its "
        f"content): {HINT}"]
    assert not (project / "out").exists()


@pytest.mark.parametrize("edit, why", [
    (ten_times_the_replicas,
     "pool g6e-xlarge: replicas 70 is not replicas_for_demand 6 + redundancy_replicas 1 (and 4 more)"),
    (lambda d: d["plan"]["totals"].update(usd_per_month=-1.0), "plan.totals.usd_per_month is negative (-1.0)"),
    (lambda d: d["plan"]["totals"].update(all_in_usd_per_month=1.0),  # under any budget gate
     "totals.all_in_usd_per_month 1 is not usd_per_month + platform_usd_per_month (and 1 more)"),
    (lambda d: d["plan"]["pools"][0]["per_replica"].update(goodput_output_tokens_per_s=float("nan")),
     "plan.pools[0].per_replica.goodput_output_tokens_per_s is not a finite number (NaN)"),
])
def test_a_resealed_edit_is_still_refused_by_the_plans_own_figures(
        project: Path, edit: Callable[[dict[str, Any]], None], why: str) -> None:
    plan_file = project / "stacks" / "Pulumi.dev.plan.json"
    doc = doc_of()
    edit(doc)
    plan_file.write_text(json.dumps(resealed(doc), indent=2))
    code, out = cli("render", "stacks/Pulumi.dev.yaml", "--out", "out")
    assert code == 2, out
    assert out.splitlines() == [f"error: stacks/Pulumi.dev.plan.json: {why}: {HINT}"]
    assert not (project / "out").exists()


def test_the_pulumi_program_path_refuses_it(project: Path) -> None:
    """infra/__main__.py loads the plan through require_saved_plan and turns its error into one line."""
    plan_file = project / "stacks" / "Pulumi.dev.plan.json"
    doc = doc_of()
    ten_times_the_replicas(doc)
    plan_file.write_text(json.dumps(doc, indent=2))
    with pytest.raises(SavedPlanRefusedError) as e:
        require_saved_plan("stacks/Pulumi.dev.yaml", plan_file, load_stack(project / "stacks" / "Pulumi.dev.yaml"))
    assert len(e.value.problems) == 1 and "its digest does not match its content" in e.value.problems[0]


def test_a_saved_plan_without_a_digest_is_refused() -> None:
    doc = doc_of()
    del doc["digest"]
    with pytest.raises(SavedPlanRefusedError) as e:
        parse_saved_plan(json.dumps(doc), "stacks/Pulumi.dev.plan.json", "stacks/Pulumi.dev.yaml")
    assert e.value.problems == [f"stacks/Pulumi.dev.plan.json: has no digest (not written by llmcap plan --write): "
                                f"{HINT}"]


def test_the_digest_ignores_formatting_but_not_content() -> None:
    doc = doc_of()
    text = json.dumps(doc, indent=None, sort_keys=True)  # reformatted, same content
    assert isinstance(parse_saved_plan(text, "x", "stacks/Pulumi.dev.yaml"), SavedPlan)
    doc["pinned"]["offerings"] = {}  # the pinned rows are part of what is sealed
    with pytest.raises(SavedPlanRefusedError):
        parse_saved_plan(json.dumps(doc), "x", "stacks/Pulumi.dev.yaml")


def test_plan_write_seals_what_it_writes(project: Path) -> None:
    plan_file = project / "stacks" / "Pulumi.dev.plan.json"
    plan_file.unlink()
    code, out = cli("plan", "stacks/Pulumi.dev.yaml", "--write", "--format", "json")
    assert code == 0, out
    doc = json.loads(plan_file.read_text())
    assert doc["digest"].startswith("sha256:") and doc["digest"] == body_digest(doc)


# --- llmcap diff ---------------------------------------------------------------------------------

def test_diff_from_to_refuses_a_hand_edited_saved_plan(project: Path) -> None:
    edited = project / "edited.plan.json"
    doc = doc_of()
    ten_times_the_replicas(doc)
    edited.write_text(json.dumps(doc))
    code, out = cli("diff", "--from", "stacks/Pulumi.dev.plan.json", "--to", str(edited), "--format", "json")
    assert code == 2, out
    assert out.splitlines() == [f"error: {edited}: edited since llmcap plan --write (its digest does not match "
                                f"its content): {HINT}"]


def test_diff_from_to_refuses_an_inconsistent_plan_json(project: Path) -> None:
    """A bare Plan JSON (llmcap plan --format json) carries no digest: its figures must still add up."""
    edited = project / "edited.json"
    doc = doc_of()
    ten_times_the_replicas(doc)
    edited.write_text(json.dumps(doc["plan"]))
    code, out = cli("diff", "--from", "stacks/Pulumi.dev.plan.json", "--to", str(edited), "--format", "json")
    assert code == 2, out
    assert out.splitlines() == [f"error: {edited}: pool g6e-xlarge: replicas 70 is not replicas_for_demand 6 + "
                                f"redundancy_replicas 1 (and 4 more)"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_diff_gate_fails_closed_on_a_hand_edited_saved_plan(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.diff_support import cli_app

    repo = tmp_path / "repo"
    (repo / "stacks").mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "llmcap test")
    git(repo, "config", "user.email", "llmcap-test@example.invalid")
    git(repo, "config", "commit.gpgsign", "false")
    for name in ("Pulumi.dev.yaml", "Pulumi.dev.plan.json"):
        shutil.copy(STACKS / name, repo / "stacks" / name)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    doc = doc_of()
    ten_times_the_replicas(doc)
    (repo / "stacks" / "Pulumi.dev.plan.json").write_text(json.dumps(doc, indent=2))
    monkeypatch.chdir(repo)
    no_local_data(monkeypatch, tmp_path)

    def run(*args: str) -> tuple[int, str]:
        r = CliRunner().invoke(cli_app(), ["diff", "--base", "HEAD", *args], env=ENV)
        return r.exit_code, r.output

    refused = ("stack dev cannot be priced at working tree (refused saved plan: working tree:"
               "stacks/Pulumi.dev.plan.json: edited since llmcap plan --write (its digest does not match its content)")
    for gate in (["--fail-above-percent", "10"], ["--budget-usd-month", "1000000000"]):
        code, md = run(*gate)
        assert code == 1 and refused in md, md
    # a refused plan fails the diff even where no gate is set: it is never priced as the planner's
    code, md = run("--format", "json")
    assert code == 1
    side = {s["stack"]: s for s in json.loads(md.split("\nerror:", 1)[0])["stacks"]}["dev"]["after"]
    assert side["planned"] is False and side["reason"].startswith("refused saved plan: ")
