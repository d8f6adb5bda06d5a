"""`llmcap validate` checks what a stack means, in one line each (its speed: bench/cli_speed.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.cli import app

ROOT = Path(__file__).resolve().parents[1]
DEV = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()


def _validate(tmp_path: Path, text: str) -> tuple[int, str, str]:
    f = tmp_path / "Pulumi.t.yaml"
    f.write_text(text)
    r = CliRunner().invoke(app, ["validate", str(f)])
    return r.exit_code, r.stdout, r.stderr


def _edit(old: str, new: str) -> str:
    assert old in DEV, old
    return DEV.replace(old, new)


def test_context_beyond_the_model_is_an_error(tmp_path: Path) -> None:
    code, _, err = _validate(tmp_path, _edit("prompt_tokens: 1024", "prompt_tokens: 9000"))
    assert code == 2 and err.count("\n") == 1 and "8,192-token context" in err


@pytest.mark.parametrize(("old", "new", "hint"), [
    ("ttft_p95_ms: 1000", "ttft_p95_ms: 5", "did you mean 5,000 ms?"),
])
def test_suspicious_values_warn_in_one_line(tmp_path: Path, old: str, new: str, hint: str) -> None:
    code, out, err = _validate(tmp_path, _edit(old, new))
    assert code == 0 and out.startswith("OK")
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: ") and hint in lines[0], err


@pytest.mark.parametrize(("old", "new", "hint"), [
    ("itl_p95_ms: 25", "itl_p95_ms: 0.03", "did you mean 30 ms?"),
    ("ttft_p95_ms: 1000", "ttft_p95_ms: 2", "did you mean 2,000 ms?"),
])
def test_a_unit_slip_below_the_engine_floor_is_an_error_with_the_hint(tmp_path: Path, old: str, new: str,
                                                                      hint: str) -> None:
    code, out, err = _validate(tmp_path, _edit(old, new))
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and out == "" and len(lines) == 1, err
    assert "below one engine step" in lines[0] and hint in lines[0], err


def test_prequantized_precision_without_checkpoint(tmp_path: Path) -> None:
    line = next(x for x in DEV.splitlines() if "int4-awq: casperhansen" in x)
    no_ckpt = _edit("checkpoints:\n" + line, "checkpoints: {}")
    code, _, err = _validate(tmp_path, no_ckpt)
    assert code == 0 and "int4-awq needs a pre-quantized checkpoint" in err and err.count("\n") == 1
    only_awq = no_ckpt.replace(next(x for x in no_ckpt.splitlines() if "precision:" in x),
                               "    precision: int4-awq")
    code, _, err = _validate(tmp_path, only_awq)
    assert code == 2 and "int4-awq needs a pre-quantized checkpoint" in err and err.count("\n") == 1


def test_bundled_stacks_validate_clean() -> None:
    """Each bundled stack validates with no warning, offline, with no home directory. How fast
    (target < 1 s each, Python start-up included): `python bench/cli_speed.py`."""
    paths = [str(p) for p in sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))]
    # one fresh Python (no PATH, no home, offline) validating each in turn, as `llmcap validate FILE` does
    code = ("import json, sys; from typer.testing import CliRunner; from sizing.cli import app; "
            "print(json.dumps([[p, r.exit_code, r.stderr] for p in sys.argv[1:] "
            "for r in [CliRunner().invoke(app, ['validate', p])]]))")
    r = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, cwd=ROOT,
                       text=True, env={"PATH": "", "HF_HUB_OFFLINE": "1", "HOME": str(ROOT / ".nohome")},
                       timeout=300)  # a hang guard only
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    assert [p for p, _, _ in results] == paths
    for path, exit_code, stderr in results:
        assert exit_code == 0 and stderr == "", (path, stderr)
