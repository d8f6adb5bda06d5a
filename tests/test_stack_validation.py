"""Stack files: valid ones load; bad ones give one line per problem, exit 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.cli import app
from sizing.errors import SpecError
from sizing.stack import apply_overrides, load_stack

ROOT = Path(__file__).resolve().parents[1]
STACKS = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
runner = CliRunner()

BAD = """\
config:
  aws:region: us-east-1
  llmcap:workload:
    model: meta-llama/Meta-Llama-3-8B-Instruct
    precision: fp16
    prompt_tokens: -5
    output_tokens: 512
    colour: blue
    traffic:
      concurrent_users: 100
      peak_requests_per_s: 20
"""


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.name)
def test_bundled_stacks_validate(path: Path) -> None:
    r = runner.invoke(app, ["validate", str(path)])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("OK ")


def test_bad_stack_names_each_problem(tmp_path: Path) -> None:
    f = tmp_path / "Pulumi.bad.yaml"
    f.write_text(BAD)
    r = runner.invoke(app, ["validate", str(f)])
    assert r.exit_code == 2
    out = r.output
    assert "Traceback" not in out
    assert "llmcap:workload.colour: unknown key" in out
    assert "llmcap:workload.prompt_tokens" in out and "greater than 0" in out
    assert "exactly one of concurrent_users or peak_requests_per_s" in out
    assert len([ln for ln in out.splitlines() if ln.startswith("error:")]) == 3


@pytest.mark.parametrize("text,needle", [
    ("config: [1, 2", "not valid YAML"),
    ("- a\n- b\n", "a mapping with a `config:` key"),
    ("config:\n  llmcap:hardwere: {}\n  llmcap:workload: {}\n", "did you mean llmcap:hardware"),
    ("config:\n  aws:region: us-east-1\n", "llmcap:workload: missing"),
])
def test_malformed_files(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "Pulumi.x.yaml"
    f.write_text(text)
    r = runner.invoke(app, ["validate", str(f)])
    assert r.exit_code == 2
    assert needle in r.output
    assert "Traceback" not in r.output


def test_unknown_model_gpu_region_suggest(tmp_path: Path) -> None:
    text = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    text = text.replace("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b-instrct")
    text = text.replace("us-east-1", "us-east-7").replace("redundancy: 1", "redundancy: 1\n    gpus: [H100]")
    f = tmp_path / "Pulumi.y.yaml"
    f.write_text(text)
    r = runner.invoke(app, ["validate", str(f)])
    assert r.exit_code == 2
    assert "did you mean llama-3-8b-instruct" in r.output
    assert "unknown region 'us-east-7'" in r.output
    assert "did you mean H100-SXM" in r.output


def test_set_overrides() -> None:
    s = load_stack(ROOT / "stacks" / "Pulumi.dev.yaml",
                   ["workload.traffic.concurrent_users=1000", "hardware.strategy=scale-up", "region=us-west-2"])
    assert s.workload.traffic.concurrent_users == 1000
    assert s.hardware.strategy == "scale-up"
    assert s.region == "us-west-2"
    with pytest.raises(SpecError):
        apply_overrides({}, ["no-equals-sign"])


def test_token_length_forms() -> None:
    s = load_stack(ROOT / "stacks" / "Pulumi.dev.yaml", ["workload.prompt_tokens={mean: 800, p95: 2000}"])
    assert s.workload.prompt_tokens.mean == 800
    assert s.workload.context_tokens == 2000 + 512
    with pytest.raises(SpecError) as e:
        load_stack(ROOT / "stacks" / "Pulumi.dev.yaml", ["workload.prompt_tokens={mean: 800, p95: 100}"])
    assert "p95 (100) must be at least the mean (800)" in e.value.problems[0]


def test_schema_command_is_json() -> None:
    import json

    r = runner.invoke(app, ["schema"])
    assert r.exit_code == 0
    doc = json.loads(r.output)
    assert "llmcap:workload" in doc["properties"]
    assert doc["properties"]["llmcap:workload"]["additionalProperties"] is False


def test_missing_file_and_directory_are_one_line_each(tmp_path: Path) -> None:
    for target, needle in ((tmp_path / "nope.yaml", "no such stack file"), (tmp_path, "is a directory")):
        r = runner.invoke(app, ["validate", str(target)])
        assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output


@pytest.mark.parametrize(("key", "value"), [("workload.engine", "tgi"), ("workload.precision", "fp3")])
def test_a_bad_value_of_a_one_or_list_field_is_one_line(key: str, value: str) -> None:
    # `engine` and `precision` take one value or a list: pydantic reports both union branches, but the
    # user gave one value, so the "should be a valid list" branch is noise
    root = Path(__file__).resolve().parents[1]
    r = CliRunner().invoke(app, ["plan", str(root / "stacks" / "Pulumi.dev.yaml"), "--set", f"{key}={value}"])
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert lines[0].startswith(f"error: llmcap:{key}: Input should be") and f"(got '{value}')" in lines[0]


def test_a_bad_item_of_a_list_field_is_one_line_naming_the_item() -> None:
    root = Path(__file__).resolve().parents[1]
    r = CliRunner().invoke(app, ["plan", str(root / "stacks" / "Pulumi.dev.yaml"), "--set",
                                 "workload.engine=[vllm, tgi]"])
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert lines[0].startswith("error: llmcap:workload.engine.1: Input should be") and "(got 'tgi')" in lines[0]
