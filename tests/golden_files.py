"""Golden-file comparison; the `update_golden` fixture in conftest.py says when to rewrite.

`check_golden` compares one file, `check_golden_dir` a whole folder (one folder per case: the set of
files must match too, and updating removes files the output no longer has). A mismatch fails with a
unified diff. Regenerate every golden file with `bash scripts/update_goldens.sh`."""

from __future__ import annotations

import difflib
from pathlib import Path

GOLDEN_DIR = Path(__file__).parent / "golden"
ROOT = Path(__file__).resolve().parents[1]
HOW_TO_UPDATE = "if the change is intended, run `bash scripts/update_goldens.sh` (or pytest --update-golden) " \
                "and review the diff"
MAX_DIFF_LINES = 200


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def unified_diff(expected: str, actual: str, name: str) -> str:
    lines = list(difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                      fromfile=f"{name} (golden)", tofile=f"{name} (output)"))
    if len(lines) > MAX_DIFF_LINES:
        lines = lines[:MAX_DIFF_LINES] + [f"... {len(lines) - MAX_DIFF_LINES} more diff lines\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def check_golden(path: Path, text: str, update: bool) -> None:
    """Compare `text` with the golden file at `path`, or rewrite it when updating."""
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{_rel(path)} is missing; {HOW_TO_UPDATE}"
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        raise AssertionError(f"{_rel(path)} differs from the output; {HOW_TO_UPDATE}\n"
                             + unified_diff(expected, text, _rel(path)))


def check_golden_dir(folder: Path, files: dict[str, str], update: bool) -> None:
    """Compare a folder of golden files (relative path → text) with the output, file by file."""
    existing = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else set()
    if update:
        for stale in existing - set(files):
            (folder / stale).unlink()
        for rel, text in files.items():
            check_golden(folder / rel, text, True)
        return
    problems = []
    missing, extra = sorted(set(files) - existing), sorted(existing - set(files))
    if missing:
        problems.append(f"{_rel(folder)}: no golden file for {', '.join(missing)}")
    if extra:
        problems.append(f"{_rel(folder)}: the output no longer has {', '.join(extra)}")
    for rel in sorted(set(files) & existing):
        expected = (folder / rel).read_text(encoding="utf-8")
        if expected != files[rel]:
            problems.append(f"{_rel(folder / rel)} differs from the output\n"
                            + unified_diff(expected, files[rel], _rel(folder / rel)))
    if problems:
        raise AssertionError("\n".join(problems) + f"\n{HOW_TO_UPDATE}")
