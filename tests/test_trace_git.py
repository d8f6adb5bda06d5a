"""`llmcap diff` reads a stack's trace at the ref it compares (issue 33 item 4): the trace file at that
commit, within the trace limits, not the working tree's; a change to the trace alone is a change of the
stack. On a temporary git repository whose trace differs between refs, with the real planner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.diff_support import git, init_repo, run_diff

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
STACK = """config:
  aws:region: us-east-1
  llmcap:workload:
    model: meta-llama/Llama-3.1-8B-Instruct
    precision: fp16
    trace: ../traces/t.csv
    slo:
      ttft: {p95: 3000}
  llmcap:hardware:
    gpus: [L40S]
    redundancy: 0
"""


def trace(rate: float, n: int = 240) -> str:
    return "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i / rate:.4f},1500,150\n" for i in range(n))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "stacks").mkdir(parents=True)
    (r / "traces").mkdir()
    init_repo(r)
    (r / "stacks" / "Pulumi.t.yaml").write_text(STACK)
    (r / "traces" / "t.csv").write_text(trace(0.5))
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "light traffic")
    return r


run = run_diff


def test_each_side_plans_from_its_own_refs_trace(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "traces" / "t.csv").write_text(trace(40.0))
    git(repo, "commit", "-q", "-am", "heavy traffic")
    (repo / "traces" / "t.csv").write_text(trace(0.5))  # the working tree is light again: not what HEAD holds
    code, out = run(repo, monkeypatch, "--base", "HEAD~1", "--head", "HEAD", "--format", "json")
    assert code == 0, out
    s = {x["stack"]: x for x in json.loads(out)["stacks"]}["t"]
    assert s["status"] == "modified", s  # only the trace changed: still a change of the stack
    assert s["after"]["gpus"] > s["before"]["gpus"] and s["delta_usd_per_month"] > 0


def test_working_tree_trace_change_is_a_change(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "traces" / "t.csv").write_text(trace(40.0))
    code, out = run(repo, monkeypatch, "--base", "HEAD", "--format", "json")
    assert code == 0, out
    s = {x["stack"]: x for x in json.loads(out)["stacks"]}["t"]
    assert s["status"] == "modified" and s["after"]["gpus"] > s["before"]["gpus"], s


def test_a_trace_missing_at_the_ref_is_one_line(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git(repo, "rm", "-q", "traces/t.csv")
    git(repo, "commit", "-q", "-m", "trace gone")
    code, out = run(repo, monkeypatch, "--base", "HEAD~1", "--head", "HEAD", "--format", "json")
    s = {x["stack"]: x for x in json.loads(out)["stacks"]}["t"]
    assert not s["after"]["planned"] and "HEAD:traces/t.csv" in s["after"]["reason"], s
    assert "\n" not in s["after"]["reason"]


def test_a_trace_outside_the_repository_is_refused(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack = repo / "stacks" / "Pulumi.t.yaml"
    stack.write_text(STACK.replace("../traces/t.csv", "../../outside.csv"))
    code, out = run(repo, monkeypatch, "--base", "HEAD", "--format", "json")
    s = {x["stack"]: x for x in json.loads(out)["stacks"]}["t"]
    assert not s["after"]["planned"] and "outside the repository" in s["after"]["reason"], s
