"""Small things people expect: --version, one-line usage errors, did-you-mean by name similarity, --plot
without matplotlib, FP8 on Ampere labelled weight-only, diff as a table in a terminal."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sizing.catalog.lookup import load_catalog, suggestions
from sizing.cli import app

ROOT = Path(__file__).resolve().parents[1]
DEV = str(ROOT / "stacks" / "Pulumi.dev.yaml")


def _run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})
    return r.exit_code, r.stdout, r.stderr


def test_version() -> None:
    code, out, _ = _run("--version")
    assert code == 0 and out.startswith("llmcap ") and out.strip() != "llmcap"


@pytest.mark.parametrize("args", [["plan", DEV, "--bogus"], ["pln"], ["plan"], ["plan", DEV, "--format", "xml"],
                                  ["estimate", "--tp", "x"]])
def test_usage_errors_are_one_line_like_ours(args: list[str]) -> None:
    code, out, err = _run(*args)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--help" in lines[0], err
    assert "╭" not in err and "Usage:" not in err


def test_did_you_mean_ranks_by_name_similarity() -> None:
    names = [m.short_name for m in load_catalog().models.values()]
    assert suggestions("llama3-8b", names)[0] == "llama-3-8b-instruct"
    assert suggestions("lama-3-8b-instruct", names)[0] == "llama-3-8b-instruct"
    code, _, err = _run("plan", DEV, "--set", "workload.model=llama3-8b")
    assert code == 2 and "did you mean llama-3-8b-instruct" in err


def test_plot_without_matplotlib_is_one_line_with_the_install_command(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    real = importlib.util.find_spec

    def no_mpl(name: str, *a: Any, **k: Any) -> Any:
        return None if name == "matplotlib" else real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", no_mpl)
    code, _, err = _run("compare", str(ROOT / "stacks" / "Pulumi.scaleout-l4.yaml"),
                        str(ROOT / "stacks" / "Pulumi.scaleup-a100.yaml"), "--sweep", "users=10..20:2",
                        "--plot", str(tmp_path / "x.png"))
    assert code == 2 and err.count("\n") == 1 and "pip install 'llmcap[plot]'" in err
    assert not (tmp_path / "x.png").exists()


def test_fp8_on_ampere_is_labelled_weight_only() -> None:
    from sizing.report.plan_views import precision_label

    assert precision_label("fp8", "A10G") == "fp8 (weight-only)"
    assert precision_label("fp8", "A100-80GB") == "fp8 (weight-only)"
    assert precision_label("fp8", "H100-SXM") == "fp8" and precision_label("fp16", "A10G") == "fp16"
    # an A100 fp8 plan says so in its summary line (the bundled dev plan no longer lands on Ampere)
    code, out, _ = _run("plan", DEV, "--set", 'hardware.gpus=["A100-80GB"]', "--set", "workload.precision=fp8")
    assert code == 0 and "fp8 (weight-only)" in out.splitlines()[0]


def test_diff_defaults_to_a_table_in_a_terminal_and_markdown_when_piped(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from sizing.planning.planner import plan_for

    (tmp_path / "a.json").write_text(plan_for(Path(DEV)).to_json())
    (tmp_path / "b.json").write_text(plan_for(Path(DEV), ["workload.traffic.concurrent_users=200"]).to_json())
    args = ["diff", "--from", str(tmp_path / "a.json"), "--to", str(tmp_path / "b.json")]
    _, piped, _ = _run(*args)
    assert piped.lstrip().startswith(("#", "<!--", "|", "**")) and "┃" not in piped
    from sizing.cli import diff_cmd

    monkeypatch.setattr(diff_cmd, "stdout_is_terminal", lambda: True)
    r = CliRunner().invoke(app, args, env={"COLUMNS": "160", "NO_COLOR": "1"})
    assert r.exit_code == 0 and ("┃" in r.stdout or "│" in r.stdout), r.stdout
