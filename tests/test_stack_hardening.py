"""Stack files that are huge, repeat a key or carry a plaintext secret (issue 18 item 10)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.cli import app

runner = CliRunner()
DEV = Path(__file__).resolve().parents[1] / "stacks" / "Pulumi.dev.yaml"


def _run(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, list(args), catch_exceptions=False)
    return r.exit_code, r.output


def test_a_20_mb_stack_file_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused from its size (fstat) before a byte is read or parsed; how fast (target < 2 s, Python
    start-up included): `python bench/cli_speed.py`."""
    import sizing.stack
    import sizing.user_files

    f = tmp_path / "Pulumi.big.yaml"
    pad = "# " + "x" * 98 + "\n"
    f.write_text(DEV.read_text() + pad * (20 * 1024 * 1024 // len(pad)))

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the oversized stack file was read or parsed")

    monkeypatch.setattr(sizing.user_files.os, "fdopen", never)
    monkeypatch.setattr(sizing.stack.yaml, "load", never)
    monkeypatch.setattr(sizing.stack.yaml, "safe_load", never)
    for cmd in ("validate", "plan"):
        code, out = _run(cmd, str(f))
        assert code == 2 and "too large for a stack file (the limit is 1 MiB)" in out, out
        assert len([ln for ln in out.splitlines() if ln.startswith("error:")]) == 1
        assert "Traceback" not in out


def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "Pulumi.fifo.yaml"
    os.mkfifo(fifo)
    code, out = _run("validate", str(fifo))  # would block forever on open() before the fix
    assert code == 2 and "not a regular file" in out


@pytest.mark.parametrize("text,key,line", [
    ("config:\n  aws:region: us-east-1\n  aws:region: eu-west-1\n", "aws:region", 3),
    ("config:\n  llmcap:workload:\n    model: a\n    prompt_tokens: 1\n    model: b\n", "model", 5),
])
def test_duplicate_keys_are_refused_with_key_and_line(tmp_path: Path, text: str, key: str, line: int) -> None:
    f = tmp_path / "Pulumi.dup.yaml"
    f.write_text(text)
    code, out = _run("validate", str(f))
    assert code == 2, out
    assert f"duplicate key {key!r} at line {line}" in out, out


def test_yaml_merge_keys_still_work(tmp_path: Path) -> None:
    f = tmp_path / "Pulumi.merge.yaml"
    f.write_text(DEV.read_text().replace("config:", "x-base: &b {}\nconfig:\n  <<: *b", 1))
    code, out = _run("validate", str(f))
    assert code == 0, out


@pytest.mark.parametrize("key", ["api_key", "hf_token"])
def test_plaintext_secret_warns_and_points_to_pulumi_secret(tmp_path: Path, key: str) -> None:
    f = tmp_path / "Pulumi.sec.yaml"
    f.write_text(DEV.read_text() + f"  llmcap:{key}: hunter2\n")
    r = runner.invoke(app, ["validate", str(f)])
    assert r.exit_code == 0, r.output
    assert f"warning: llmcap:{key} is stored in plain text" in r.output
    assert f"pulumi config set --secret llmcap:{key}" in r.output
    assert "hunter2" not in r.output
    r = runner.invoke(app, ["plan", str(f), "--format", "json"])
    assert r.exit_code == 0 and f"llmcap:{key} is stored in plain text" in r.stdout


def test_an_encrypted_secret_is_accepted_silently(tmp_path: Path) -> None:
    f = tmp_path / "Pulumi.enc.yaml"
    f.write_text(DEV.read_text() + "  llmcap:api_key:\n    secure: AAABAHhQx1rZ0N0l9Y3c2ZXJ5LXNlY3JldA==\n")
    r = runner.invoke(app, ["validate", str(f)])
    assert r.exit_code == 0 and "warning" not in r.output, r.output


def test_a_budget_too_large_for_a_float_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "Pulumi.budget.yaml"
    f.write_text(DEV.read_text() + "  llmcap:budget_usd_month: 1" + "0" * 400 + "\n")
    code, out = _run("validate", str(f))  # OverflowError traceback before the fix (found by the fuzz)
    assert code == 2 and "llmcap:budget_usd_month: must be a positive number of USD" in out, out
