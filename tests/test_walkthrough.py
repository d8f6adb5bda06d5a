"""A scripted walk through the README as a new user would take it: every command runs here, and its
output is written to docs/walkthrough.md. The test fails when the committed transcript is stale;
`bash scripts/update_goldens.sh` (or LLMCAP_UPDATE_GOLDEN=1) regenerates it.

Each step names the issue-17 item it exercises. The runs are hermetic (bundled catalog, no
calibration overlay, no network, 80 columns as in a small terminal)."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.golden_files import check_golden

ROOT = Path(__file__).resolve().parents[1]
TRANSCRIPT = ROOT / "docs" / "walkthrough.md"
MAX_LINES = 60  # longer outputs are cut in the transcript (the test still checks the whole output)

SUSPICIOUS_STACK = """\
config:
  aws:region: us-east-1
  llmcap:workload:
    model: llama-3.1-8b-instruct
    precision: [fp8, int4-awq]
    prompt_tokens: 1024
    output_tokens: 256
    traffic: {concurrent_users: 4}
    slo: {ttft_p95_ms: 5, itl_p95_ms: 25}
  llmcap:hardware:
    redundancy: 4
"""


@dataclass
class Step:
    title: str
    items: str  # the issue-17 items it shows
    args: list[str]
    columns: int = 80
    expect_code: int = 0
    expect: list[str] = field(default_factory=list)  # each must appear in the output
    files: dict[str, str] = field(default_factory=dict)  # written to the working folder first


STEPS = [
    Step("Which version is this?", "10", ["--version"], expect=["llmcap "]),
    Step("Check the bundled dev stack", "6", ["validate", "stacks/Pulumi.dev.yaml"], expect=["OK "]),
    Step("Plan it in a small terminal: pools as key: value, what binds, what a spare costs, the cold start",
         "3, 4, 8, 10", ["plan", "stacks/Pulumi.dev.yaml"],
         expect=["binds", "ITL p95 tail", "spare node", "cold start", "image pull", "skipped (no datasheet"]),
    Step("The same stack in eu-west-1, offline: the price line names the region, source and date", "1",
         ["plan", "stacks/Pulumi.dev.yaml", "--set", "region=eu-west-1", "--format", "markdown"],
         expect=["in eu-west-1", "instance prices (eu-west-1, on-demand)", "2026-01-21"]),
    Step("A region the bundled catalog has no data for", "1",
         ["plan", "stacks/Pulumi.dev.yaml", "--set", "region=us-gov-west-1"], expect_code=3,
         expect=["no AZ offerings for us-gov-west-1", "llmcap catalog refresh --region us-gov-west-1"]),
    Step("A 70B model that does not fit one L4: its own cause, exit 3 as plan", "4",
         ["estimate", "--model", "llama-3.1-70b-instruct", "--gpu", "L4", "--precision", "fp16", "--format",
          "json"], expect_code=3, expect=["weights-do-not-fit", "weights do not fit", "--tp 8 fits"]),
    Step("An infeasible plan: one line per cause and nearby changes, each re-planned and priced", "4",
         ["plan", "stacks/Pulumi.llama70b.yaml", "--set", "hardware.gpus=[L4]"], expect_code=3,
         expect=["to make it feasible: allow", "/month"]),
    Step("The same for a machine: a JSON object on stdout, exit 3", "5",
         ["plan", "stacks/Pulumi.llama70b.yaml", "--set", "hardware.gpus=[L4]", "--format", "json"],
         expect_code=3, expect=['"feasible": false', '"suggestions"', '"usd_per_month"']),
    Step("A context longer than the model's", "4, 6",
         ["plan", "stacks/Pulumi.dev.yaml", "--set", "workload.prompt_tokens=9000"], expect_code=2,
         expect=["8,192-token context"]),
    Step("validate reads what a stack means (here: SLOs in seconds, too many spares, no checkpoint)", "6",
         ["validate", "my-stack.yaml"], files={"my-stack.yaml": SUSPICIOUS_STACK},
         expect=["did you mean 5,000 ms?", "more spares than requests in flight",
                 "int4-awq needs a pre-quantized checkpoint"]),
    Step("compare strategies side by side (an option identical to another says so)", "9",
         ["compare", "stacks/Pulumi.dev.yaml", "--strategies", "scale-up,scale-out,mixed"], columns=160,
         expect=["scale-up", "scale-out", "mixed"]),
    Step("compare two different models says so", "9",
         ["compare", "stacks/Pulumi.dev.yaml", "stacks/Pulumi.llama70b.yaml", "--format", "markdown"],
         expect=["different models"]),
    Step("A typo in a model name: suggestions by name similarity", "10",
         ["plan", "stacks/Pulumi.dev.yaml", "--set", "workload.model=llama3-8b"], expect_code=2,
         expect=["did you mean llama-3-8b-instruct"]),
    Step("A typo in an option: one line, like every other error", "10",
         ["plan", "stacks/Pulumi.dev.yaml", "--ouput", "plan.json"], expect_code=2,
         expect=["error: --ouput: no such option (did you mean --out?)"]),
    Step("Save two plans and diff them (markdown for a PR comment when piped; a table in a terminal)", "10",
         ["diff", "--from", "before.json", "--to", "after.json"],
         expect=["llmcap cost diff", "Monthly cost will rise"]),
]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    import sizing.catalog.lookup

    monkeypatch.delenv("LLMCAP_CATALOG_DIR", raising=False)
    monkeypatch.setattr(sizing.catalog.lookup, "USER_CACHE_DIR", tmp_path / "no-catalog")
    monkeypatch.setenv("LLMCAP_CALIBRATION_OVERLAY", str(tmp_path / "no-overlay.json"))
    (tmp_path / "stacks").symlink_to(ROOT / "stacks")
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def _prepare_plans(cwd: Path) -> None:
    from sizing.planning.planner import plan_for

    (cwd / "before.json").write_text(plan_for(Path("stacks/Pulumi.dev.yaml")).to_json())
    (cwd / "after.json").write_text(
        plan_for(Path("stacks/Pulumi.dev.yaml"), ["workload.traffic.concurrent_users=200"]).to_json())


def _cut(text: str) -> str:
    lines = text.rstrip("\n").splitlines()
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES] + [f"... ({len(lines) - MAX_LINES} more lines)"]
    return "\n".join(lines)


@pytest.mark.slow  # the whole README walkthrough, command by command (about 2 CPU s)
def test_walkthrough_transcript_is_current(workdir: Path, update_golden: bool) -> None:
    from sizing.cli import app

    _prepare_plans(workdir)
    parts = ["# A first session with llmcap", "",
             "Generated by `tests/test_walkthrough.py` from the commands below, run against the bundled",
             "catalog at 80 columns; the test fails when this file is stale (`bash scripts/update_goldens.sh`",
             "regenerates it). Each step names the items of issue 17 it shows.", ""]
    failures = []
    for i, step in enumerate(STEPS, start=1):
        for name, text in step.files.items():
            (workdir / name).write_text(text)
        r = CliRunner().invoke(app, step.args, env={"COLUMNS": str(step.columns), "NO_COLOR": "1", "TERM": "dumb"})
        out = r.stdout + r.stderr
        if r.exit_code != step.expect_code:
            failures.append(f"step {i} ({step.title}): exit {r.exit_code}, expected {step.expect_code}\n{out}")
        failures += [f"step {i} ({step.title}): {e!r} not in the output" for e in step.expect if e not in out]
        parts += [f"## {i}. {step.title}", "", f"_issue 17 item {step.items}_", ""]
        for name, text in step.files.items():
            parts += [f"`{name}`:", "", "```yaml", text.rstrip("\n"), "```", ""]
        parts += ["```console", f"$ llmcap {shlex.join(step.args)}", _cut(out), f"[exit {r.exit_code}]", "```", ""]
    assert not failures, "\n".join(failures)
    text = "\n".join(parts).rstrip("\n") + "\n"
    assert str(workdir) not in text and str(ROOT) not in text
    check_golden(TRANSCRIPT, text, update_golden)
