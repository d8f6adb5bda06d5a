"""The plan reads well at 80 columns (vertical pools, fewer columns) and at 200 (the full table), with
numbers rounded for people."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.cli import app
from sizing.humanize import num, plural, usd

ROOT = Path(__file__).resolve().parents[1]
STACKS = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
UGLY = [
    (re.compile(r"\d\.\d{4,}"), "a number with 4+ decimals"),
    (re.compile(r"\$\d+\.\d(?!\d)"), "a dollar amount with one decimal"),
    (re.compile(r"(?<![\d.,])1 (replicas|GPUs|nodes|instances)\b"), "'1 <plural>'"),
    (re.compile(r"\d{5,}(?![\d-])"), "a number without thousands separators"),
]


def _plan(path: Path, columns: int, *args: str) -> str:
    r = CliRunner().invoke(app, ["plan", str(path), *args], env={"COLUMNS": str(columns), "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    return r.stdout


def _ugly(text: str) -> list[str]:
    text = re.sub(r"\S*(/|@)\S*", "", text)  # ids, URLs and model names may carry digits
    text = re.sub(r"\bcr-[0-9a-f]{8,17}\b", "", text)  # EC2 capacity reservation ids too
    return [f"{why}: {m.group(0)!r}" for rx, why in UGLY for m in rx.finditer(text)]


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.stem)
def test_80_columns_fit_without_truncation(path: Path) -> None:
    out = _plan(path, 80)
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "binds" in out and "spares" in out and "instances" in out
    assert not _ugly(out), _ugly(out)


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.stem)
def test_200_columns_show_the_whole_pool_table(path: Path) -> None:
    out = _plan(path, 200)
    assert "…" not in out
    for header in ("instance", "precision", "replicas", "binds", "$/h"):
        assert f" {header} " in out
    assert not _ugly(out), _ugly(out)


def test_markdown_numbers_read_well() -> None:
    for path in STACKS:
        md = _plan(path, 200, "--format", "markdown")
        assert not _ugly(md), (path.name, _ugly(md))


def test_humanize() -> None:
    assert [num(x) for x in (27.4765, 33.3333, 1892.3, 0.0421, 12, 1e6)] == [
        "27.5", "33.3", "1,892", "0.042", "12", "1,000,000"]
    assert [usd(x) for x in (0.2, 0.05, 14.888, 1892.3)] == ["$0.20", "$0.05", "$14.89", "$1,892"]
    assert plural(1, "replica") == "1 replica" and plural(2, "replica") == "2 replicas"
