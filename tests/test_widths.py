"""Every table fits the console (issue 27, item 4): each command's output at 80 and 120 columns has no
table line wider than the console and no cell cut with "…" (a table too wide turns into key: value per row,
as plan does); sentences and paths are left to the terminal's wrapping. Before: `instances`, `models`,
`gpus`, `diff` and `bench` cut cells at 80."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.bench_helpers import make_results, make_run
from tests.diff_support import cli_app

ROOT = Path(__file__).resolve().parents[1]
DEV = str(ROOT / "stacks" / "Pulumi.dev.yaml")
WIDTHS = (80, 120)
COMMANDS = {
    "validate": ["validate", DEV],
    "plan": ["plan", DEV],
    "compare": ["compare", DEV, "--strategies", "scale-up,scale-out"],
    "instances": ["instances"],
    "models": ["models"],
    "gpus": ["gpus"],
    "estimate": ["estimate", "--model", "llama-3.1-8b-instruct", "--gpu", "L40S", "--precision", "fp8"],
}


BOX = set("│┃┏┓┗┛┡┩┢┪╇╈┠┨┣┫━─┳┻╋┼")


def _fits(out: str, width: int) -> None:
    """No table line wider than the console and no cell cut; prose lines (sentences, paths) are left to the
    terminal's own wrapping."""
    lines = out.splitlines()
    assert lines, "no output"
    too_wide = [ln for ln in lines if len(ln) > width and BOX & set(ln)]
    assert not too_wide, f"{len(too_wide)} lines over {width} columns, e.g. {too_wide[0]!r}"
    cut = [ln for ln in lines if "…" in ln]
    assert not cut, f"cells cut: {cut[:3]}"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_output_fits(name: str, width: int) -> None:
    r = CliRunner().invoke(cli_app(), COMMANDS[name], env={"COLUMNS": str(width), "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    _fits(r.stdout, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_bench_table_fits(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from sizing.cli.bench_cmds import _print_runs

    monkeypatch.setenv("COLUMNS", str(width))
    res = make_results(None, [make_run(8, 900.0, 420.0, 21.5, planned=True), make_run(12, 1200.0, 880.0, 27.0)])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        _print_runs(res)
    _fits(buf.getvalue(), width)
    assert "TTFT p50/p95/p99 ms" in buf.getvalue() and "MISSED" in buf.getvalue()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("width", WIDTHS)
def test_diff_table_fits(width: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    (repo / "stacks").mkdir(parents=True)

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q")
    for k, v in (("user.name", "t"), ("user.email", "t@example.invalid"), ("commit.gpgsign", "false")):
        git("config", k, v)
    dev = repo / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(Path(DEV).read_text())
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    dev.write_text(dev.read_text().replace("concurrent_users: 100", "concurrent_users: 200"))
    monkeypatch.chdir(repo)
    monkeypatch.delenv("LLMCAP_CATALOG_DIR", raising=False)
    r = CliRunner().invoke(cli_app(), ["diff", "--base", "HEAD", "--format", "table"],
                           env={"COLUMNS": str(width), "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    _fits(r.stdout, width)
    assert "dev" in r.stdout


@pytest.mark.slow(reason="renders the Pulumi program under mocks (seconds a width)")
@pytest.mark.parametrize("width", WIDTHS)
def test_render_fit_table_fits(width: int, tmp_path: Path) -> None:
    r = CliRunner().invoke(cli_app(), ["render", DEV, "--out", str(tmp_path / "out")],
                           env={"COLUMNS": str(width), "NO_COLOR": "1", "HOME": os.environ.get("HOME", "")})
    assert r.exit_code == 0, r.output
    _fits(r.stdout, width)
    assert "deployability check" in r.stdout
