"""A model from a local directory plans; render and `pulumi up` need `weights_source` (17-7)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.catalog.lookup import Catalog
from sizing.catalog.weights_source import require_weights_source
from sizing.cli import app
from sizing.errors import SpecError
from sizing.planning.planner import plan_stack
from sizing.stack import load_stack

CONFIGS = Path(__file__).parent / "data" / "configs"
runner = CliRunner()

STACK = """\
config:
  aws:region: us-east-1
  llmcap:workload:
    model: {model}
{extra}    precision: bf16
    prompt_tokens: 1024
    output_tokens: 256
    traffic:
      concurrent_users: 8
    slo:
      ttft_p95_ms: 3000
      itl_p95_ms: 100
"""


def _stack(tmp_path: Path, extra: str = "") -> Path:
    d = tmp_path / "mymoe"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text((CONFIGS / "qwen3_moe.json").read_text())
    f = tmp_path / "Pulumi.local.yaml"
    f.write_text(STACK.format(model=d, extra=extra))
    return f


def test_local_directory_plans_without_weights_source(tmp_path: Path) -> None:
    plan = plan_stack(load_stack(_stack(tmp_path)))
    assert plan.model == "mymoe"


def test_render_refuses_a_local_model_without_weights_source(tmp_path: Path) -> None:
    r = runner.invoke(app, ["render", str(_stack(tmp_path)), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "llmcap:workload.weights_source" in lines[0] and "hf download" not in r.output
    assert not (tmp_path / "out").exists()


def test_weights_source_names_the_served_checkpoint(tmp_path: Path) -> None:
    f = _stack(tmp_path, "    weights_source: Qwen/Qwen3-30B-A3B\n")
    stack = load_stack(f)
    require_weights_source(Catalog(), stack.workload.model, stack.workload.weights_source)
    plan = plan_stack(stack)
    assert plan.model == "Qwen/Qwen3-30B-A3B" and all(p.vllm.model == "Qwen/Qwen3-30B-A3B" for p in plan.pools)


@pytest.mark.parametrize("bad", ["not an id", "s3://", "http://x/y", "a/b/c"])
def test_weights_source_must_be_an_hf_id_or_s3_uri(tmp_path: Path, bad: str) -> None:
    f = _stack(tmp_path, f"    weights_source: '{bad}'\n")
    r = runner.invoke(app, ["validate", str(f)])
    assert r.exit_code == 2 and "weights_source" in r.output and "Traceback" not in r.output


def test_s3_weights_source_plans_but_is_refused_for_deploy(tmp_path: Path) -> None:
    f = _stack(tmp_path, "    weights_source: s3://my-models/mymoe/\n")
    stack = load_stack(f)
    assert plan_stack(stack).model == "s3://my-models/mymoe/"
    with pytest.raises(SpecError, match="weights_source"):
        require_weights_source(Catalog(), stack.workload.model, stack.workload.weights_source)
