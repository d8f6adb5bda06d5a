"""What `llmcap diff` reads from git is bounded and decoded only once whole (issue 27, item 5): a binary
or Latin-1 stack file or saved plan committed at head, or a 30 MB stack file, makes that stack's side
"unreadable" with the reason, never a traceback (exit 1, which the cost-gate workflow reads as "gate
crossed") or a hang. Before: UnicodeDecodeError for the first two, the whole blob parsed for the third."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.diff_support import cli_app

STACKS = Path(__file__).resolve().parents[1] / "stacks"
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "stacks").mkdir(parents=True)
    git(r, "init", "-q")
    for k, v in (("user.name", "llmcap test"), ("user.email", "t@example.invalid"), ("commit.gpgsign", "false")):
        git(r, "config", k, v)
    (r / "stacks" / "Pulumi.dev.yaml").write_text((STACKS / "Pulumi.dev.yaml").read_text())
    (r / "stacks" / "Pulumi.dev.plan.json").write_text((STACKS / "Pulumi.dev.plan.json").read_text())
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "base")
    return r


def _diff(repo: Path, monkeypatch: pytest.MonkeyPatch, path: str, data: bytes) -> tuple[int, dict, str]:
    (repo / path).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "head")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("LLMCAP_CATALOG_DIR", raising=False)
    r = CliRunner().invoke(cli_app(), ["diff", "--base", "HEAD~1", "--head", "HEAD", "--format", "json"],
                           env={"COLUMNS": "120"})
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    return r.exit_code, doc, r.output


def _head_reason(doc: dict) -> str:
    (stack,) = doc["stacks"]
    assert stack["after"]["planned"] is False
    return str(stack["after"]["reason"])


@pytest.mark.parametrize(("path", "data", "why"), [
    ("stacks/Pulumi.dev.yaml", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "not UTF-8 text"),
    ("stacks/Pulumi.dev.yaml", "config:\n  aws:region: us-east-1 # café\n".encode("latin-1"), "not UTF-8 text"),
    ("stacks/Pulumi.dev.plan.json", '{"stack": "d\u00e9v"}'.encode("latin-1"), "not UTF-8 text"),
    ("stacks/Pulumi.dev.yaml", b"# " + b"x" * (30 * 2**20) + b"\n", "MiB is too large for a stack file"),
])
def test_an_unreadable_file_at_head_is_that_side_unreadable(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                            path: str, data: bytes, why: str) -> None:
    code, doc, out = _diff(repo, monkeypatch, path, data)
    assert code == 0, out
    reason = _head_reason(doc)
    assert reason.startswith("unreadable: HEAD:") and why in reason, reason
    assert "Traceback" not in out and "UnicodeDecodeError" not in out


def test_a_bug_in_diff_exits_70_never_1(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 1 means "a gate was crossed" to the workflow; a crash must not read as one (sizing.errors.EXIT_BUG)."""
    import sizing.adapters.git as git_adapter

    def boom(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(git_adapter, "diff_refs", boom)
    monkeypatch.chdir(repo)
    r = CliRunner().invoke(cli_app(), ["diff", "--base", "HEAD"], env={"COLUMNS": "120"})
    assert r.exit_code == 70, (r.exit_code, r.output)
    assert "ZeroDivisionError" in r.output and "stopped on a bug" in r.output


def test_a_side_without_a_plan_prices_no_cost_line(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack changed without `llmcap plan --write` (its saved plan stale) has no plan at head: the comment
    said "not priced" and then listed -$9,510 of cost lines, as if the fleet were deleted."""
    dev = repo / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("concurrent_users: 100", "concurrent_users: 200"))
    git(repo, "commit", "-q", "-am", "head")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("LLMCAP_CATALOG_DIR", raising=False)
    r = CliRunner().invoke(cli_app(), ["diff", "--base", "HEAD~1", "--head", "HEAD", "--format", "markdown"],
                           env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.output
    assert "stale saved plan" in r.stdout and "Cost change not priced" in r.stdout
    gpu_line = next(ln for ln in r.stdout.splitlines() if ln.startswith("| GPU instances (on-demand"))
    assert gpu_line.endswith("| no plan | not priced |"), gpu_line
    assert "-$" not in r.stdout, [ln for ln in r.stdout.splitlines() if "-$" in ln]
