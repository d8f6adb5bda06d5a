"""Golden-file comparison; the `update_golden` fixture in conftest.py says when to rewrite."""

from __future__ import annotations

from pathlib import Path

GOLDEN_DIR = Path(__file__).parent / "golden"


def check_golden(path: Path, text: str, update: bool) -> None:
    """Compare `text` with the golden file at `path`, or rewrite it when updating."""
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing; run pytest --update-golden (or LLMCAP_UPDATE_GOLDEN=1) to create it"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{path} differs from the output; if the change is intended, rerun with --update-golden"
