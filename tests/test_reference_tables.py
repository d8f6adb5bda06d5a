"""The reference-scenario blocks of README.md and docs/reference-scenario.md (between the
`reference-table` markers) are what scripts/reference_tables.py prints from llmcap's JSON today: the
test fails when a committed figure is stale. `bash scripts/update_goldens.sh` (or LLMCAP_UPDATE_GOLDEN=1)
rewrites them, as it does docs/walkthrough.md."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.golden_files import HOW_TO_UPDATE, unified_diff

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    name = "reference_tables_script"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "reference_tables.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _opt(feasible: bool, usd: float = 0.0) -> dict[str, object]:
    return {"feasible": feasible, "usd_per_month": usd}


def test_cheaper_names_the_winner_and_the_saving_as_compare_does() -> None:
    m = _script()
    assert m.cheaper({m.L4: _opt(True, 137_725.89), m.A100: _opt(True, 100_181.73)}) == "A100, by 27 %"
    assert m.cheaper({m.L4: _opt(True, 16_796.0), m.A100: _opt(True, 40_072.69)}, bold=True) == "**L4, by 58 %**"
    assert m.cheaper({m.L4: _opt(False), m.A100: _opt(True, 1.0)}) == "A100 (the other has no plan)"


def test_replace_block_keeps_the_text_around_the_markers_and_refuses_a_missing_marker() -> None:
    m = _script()
    text = f"before\n{m.BEGIN}\nold\n{m.END}\nafter\n"
    assert m.replace_block(text, "new\n", "X") == f"before\n{m.BEGIN}\nnew\n{m.END}\nafter\n"
    with pytest.raises(SystemExit, match="X: needs exactly one"):
        m.replace_block("no markers\n", "new\n", "X")
    with pytest.raises(SystemExit, match="needs exactly one"):
        m.replace_block(f"{m.END}\n{m.BEGIN}\n", "new\n", "X")


def test_write_atomic_leaves_no_temporary_file(tmp_path: Path) -> None:
    m = _script()
    target = tmp_path / "doc.md"
    target.write_text("old\n")
    m.write_atomic(target, "new\n")
    assert target.read_text() == "new\n" and [p.name for p in tmp_path.iterdir()] == ["doc.md"]


# six comparisons, a 140-point users sweep and four plans: about 8 CPU s, under the ~20 s that would make it slow
def test_reference_tables_in_the_docs_are_current(update_golden: bool) -> None:
    m = _script()
    new = m.blocks(m.gather(m.cli_runner()))
    stale = []
    for path, block in new.items():
        old = path.read_text(encoding="utf-8")
        text = m.replace_block(old, block, path.name)
        if text == old:
            continue
        if update_golden:
            m.write_atomic(path, text)
        else:
            stale.append(f"{path.relative_to(ROOT)} differs from scripts/reference_tables.py; {HOW_TO_UPDATE}\n"
                         + unified_diff(old, text, str(path.relative_to(ROOT))))
    assert not stale, "\n".join(stale)
