"""Leftover temporary files are cleaned on the next write (issue 27, item 7): kill -9 between mkstemp and
the rename in atomic_write_text left `.<name>.*.tmp` files behind for good."""

from __future__ import annotations

import os
import time
from pathlib import Path

from sizing.user_files import STALE_TEMP_S, atomic_write_text


def test_the_next_write_removes_a_killed_writers_temp_files_and_keeps_a_live_ones(tmp_path: Path) -> None:
    target = tmp_path / "overlay.json"
    stale = tmp_path / ".overlay.json.abc123.tmp"
    live = tmp_path / ".overlay.json.def456.tmp"
    other = tmp_path / ".other.json.abc123.tmp"
    for p in (stale, live, other):
        p.write_text("{half")
    old = time.time() - STALE_TEMP_S - 5
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    atomic_write_text(target, "{}\n")
    assert target.read_text() == "{}\n"
    assert not stale.exists() and live.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.json.abc123.tmp", ".overlay.json.def456.tmp",
                                                          "overlay.json"]
