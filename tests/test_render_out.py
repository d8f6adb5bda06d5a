"""`llmcap render --out DIR` (issue 18 item 5, issue 14 item 7): an earlier render in DIR is replaced
whole (no stale manifest survives beside the new ones), any other non-empty folder is refused and left
as it was, and the render says which plan it rendered (the saved one, or a fresh one)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.cli.render_dir import MARKER
from tests.isolation import no_local_data

ROOT = Path(__file__).resolve().parents[1]
STACKS = ROOT / "stacks"


def render(*args: str) -> tuple[int, str]:
    from sizing.cli import app

    r = CliRunner().invoke(app, ["render", *args], env={"COLUMNS": "120", "NO_COLOR": "1"})
    return r.exit_code, r.output


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(STACKS, tmp_path / "stacks")
    monkeypatch.chdir(tmp_path)
    no_local_data(monkeypatch, tmp_path)
    return tmp_path


def files(d: Path) -> set[str]:
    return {p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()}


def test_a_second_render_leaves_no_file_of_the_first(project: Path) -> None:
    out = project / "out"
    code, text = render("stacks/Pulumi.dev.yaml", "--out", str(out), "--target", "compose")
    assert code == 0, text
    assert (out / "docker-compose.yml").is_file()
    # an earlier render's manifest that this render does not write (as a 405B LeaderWorkerSet would be)
    code, text = render("stacks/Pulumi.dev.yaml", "--out", str(out))
    assert code == 0, text
    assert "replaced the earlier render of stack dev (compose)" in text
    assert not (out / "docker-compose.yml").exists() and (out / "resources.json").is_file()
    listed = {line.split("wrote ", 1)[1] for line in text.splitlines() if line.startswith("wrote ")}
    assert files(out) == {Path(p).relative_to(out).as_posix() for p in listed} | {MARKER}


def test_stale_manifest_of_another_stack_is_gone_after_rendering_dev(project: Path) -> None:
    out = project / "out"
    code, text = render("stacks/Pulumi.dev.yaml", "--out", str(out))
    assert code == 0, text
    first = files(out)
    # what a 405B render leaves: a LeaderWorkerSet manifest, recorded as written by that render
    import json

    marker = json.loads((out / MARKER).read_text())
    (out / "manifests" / "leaderworkerset-llmcap-vllm-p5.yaml").write_text("kind: LeaderWorkerSet\n")
    marker["files"].append("manifests/leaderworkerset-llmcap-vllm-p5.yaml")
    marker["stack"] = "llama405b"
    (out / MARKER).write_text(json.dumps(marker))
    code, text = render("stacks/Pulumi.dev.yaml", "--out", str(out))
    assert code == 0, text
    assert files(out) == first and "replaced the earlier render of stack llama405b" in text


@pytest.mark.parametrize("setup", ["foreign folder", "foreign file in a render", "a file"])
def test_a_folder_that_is_not_an_earlier_render_is_refused_and_untouched(project: Path, setup: str) -> None:
    out = project / "out"
    if setup == "a file":
        out.write_text("mine\n")
    else:
        if setup == "foreign file in a render":
            assert render("stacks/Pulumi.dev.yaml", "--out", str(out), "--target", "compose")[0] == 0
        out.mkdir(exist_ok=True)
        (out / "notes.txt").write_text("mine\n")
    before = {p: p.read_bytes() for p in ([out] if out.is_file() else out.rglob("*")) if p.is_file()}
    code, text = render("stacks/Pulumi.dev.yaml", "--out", str(out))
    assert code == 2 and text.count("\n") == 1 and text.startswith(f"error: --out {out}: "), text
    after = {p: p.read_bytes() for p in ([out] if out.is_file() else out.rglob("*")) if p.is_file()}
    assert after == before
    assert not [p for p in project.iterdir() if p.name.startswith(".out.")]  # no temporary folder left


def test_a_failed_render_leaves_the_earlier_one(project: Path) -> None:
    out = project / "out"
    assert render("stacks/Pulumi.dev.yaml", "--out", str(out), "--target", "compose")[0] == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    code, text = render("stacks/Pulumi.llama405b.yaml", "--out", str(out), "--target", "compose")
    assert code == 2, text  # 405B does not fit one GPU server
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert not [p for p in project.iterdir() if p.name.startswith(".out.")]


def test_render_says_which_plan(project: Path) -> None:
    out = str(project / "out")
    code, text = render("stacks/Pulumi.dev.yaml", "--out", out, "--target", "compose")
    assert code == 0 and text.splitlines()[0] == "plan: saved stacks/Pulumi.dev.plan.json (matches " \
                                                  "stacks/Pulumi.dev.yaml)"
    code, text = render("stacks/Pulumi.dev.yaml", "--out", out, "--target", "compose", "--fresh")
    assert code == 0 and text.splitlines()[0].startswith("plan: planned now from this machine's catalog (--fresh)")
    dev = project / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("concurrent_users: 100", "concurrent_users: 150"))
    code, text = render("stacks/Pulumi.dev.yaml", "--out", out, "--target", "compose")
    assert code == 2 and text == ("error: stacks/Pulumi.dev.yaml changed since its saved plan: run llmcap plan "
                                  "stacks/Pulumi.dev.yaml --write and review the diff (or preview the change "
                                  "with llmcap render --fresh)\n")
    (project / "stacks" / "Pulumi.dev.plan.json").unlink()
    code, text = render("stacks/Pulumi.dev.yaml", "--out", out, "--target", "compose")
    assert code == 0 and "warning: stacks/Pulumi.dev.yaml has no saved plan; rendering a fresh plan" in text
    assert "plan: planned now from this machine's catalog (no saved plan stacks/Pulumi.dev.plan.json)" in text
