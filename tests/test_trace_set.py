"""`--set workload.trace.X=...` on a stack whose trace is a plain path (issue 33 item 5): the path is
promoted to the mapping form; a key the trace does not have is one line naming it and the keys it has."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sizing.errors import SpecError
from sizing.stack import apply_overrides

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
TRACES = Path(__file__).parent / "data" / "traces"


def test_set_a_trace_key_promotes_the_plain_path() -> None:
    cfg = {"llmcap:workload": {"model": MODEL, "trace": "azure2023_code.csv"}}
    out = apply_overrides(cfg, ["workload.trace.time_scale=2", "workload.trace.prefix_reuse=false"])
    assert out["llmcap:workload"]["trace"] == {"path": "azure2023_code.csv", "time_scale": 2, "prefix_reuse": False}
    assert cfg["llmcap:workload"]["trace"] == "azure2023_code.csv"  # the file's config is not changed


def test_set_a_trace_key_validates_into_the_stack() -> None:
    from sizing.stack import stack_from_config

    cfg = apply_overrides({"llmcap:workload": {"model": MODEL, "trace": "azure2023_conv.csv"}},
                          ["workload.trace.time_scale=2"])
    st = stack_from_config("t", cfg, "test", TRACES)
    assert st.workload.trace is not None and st.workload.trace.time_scale == 2
    assert st.workload.trace.path == "azure2023_conv.csv"


def test_set_a_bad_trace_key_is_one_line() -> None:
    with pytest.raises(SpecError) as e:
        apply_overrides({"llmcap:workload": {"trace": "a.csv"}}, ["workload.trace.speed=2"])
    assert str(e.value) == ("--set 'workload.trace.speed=2': llmcap:workload.trace has no key 'speed'; its keys: "
                            "path, format, time_scale, prefix_reuse, prefix_block_tokens, routing")


def test_cli_plan_with_a_trace_set_on_a_plain_path(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.t.yaml"
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n1.0,300,30\n")
    stack.write_text(f"config:\n  llmcap:workload:\n    model: {MODEL}\n    trace: t.csv\n")
    r = subprocess.run([sys.executable, "-c", "from sizing.cli import main; main()", "plan", str(stack),
                        "--set", "workload.trace.bogus=1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and "llmcap:workload.trace has no key 'bogus'" in lines[0], lines
