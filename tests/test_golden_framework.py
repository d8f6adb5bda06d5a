"""The golden-file checker itself: a mismatch fails with a unified diff, missing and stale files are
named, updating rewrites and prunes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.golden_files import check_golden, check_golden_dir


def test_mismatch_shows_a_unified_diff(tmp_path: Path) -> None:
    golden = tmp_path / "a.txt"
    golden.write_text("one\ntwo\nthree\n")
    with pytest.raises(AssertionError) as e:
        check_golden(golden, "one\n2\nthree\n", update=False)
    msg = str(e.value)
    assert "-two" in msg and "+2" in msg and "@@" in msg and "update_goldens.sh" in msg
    check_golden(golden, "one\ntwo\nthree\n", update=False)


def test_folder_names_missing_and_stale_files_and_update_prunes(tmp_path: Path) -> None:
    folder = tmp_path / "case"
    check_golden_dir(folder, {"x.txt": "x\n", "sub/y.txt": "y\n"}, update=True)
    (folder / "stale.txt").write_text("old\n")
    with pytest.raises(AssertionError) as e:
        check_golden_dir(folder, {"x.txt": "x\n", "sub/y.txt": "y\n", "new.txt": "n\n"}, update=False)
    assert "no golden file for new.txt" in str(e.value) and "no longer has stale.txt" in str(e.value)
    check_golden_dir(folder, {"x.txt": "x2\n"}, update=True)
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == ["x.txt"]
    check_golden_dir(folder, {"x.txt": "x2\n"}, update=False)
