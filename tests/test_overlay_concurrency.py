"""Concurrent `llmcap calibrate` writers (issue 18 item 3): 8 processes each add an entry under the
lock and all 8 survive; a reader polling meanwhile never sees a half-written overlay."""

from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path
from typing import Any

import pytest

from sizing.errors import SpecError
from sizing.perf.overlay import OverlayEntry, load_overlay, update_overlay

WRITERS = 8
ROUNDS = 6  # each writer re-writes its entry this many times, widening the race window


def _entry(i: int, r: int) -> OverlayEntry:
    return OverlayEntry(gpu=f"GPU{i}", engine="vllm", model="m/x", goodput_scale=1.0 + r / 100,
                        measured_goodput_output_tokens_per_s_per_replica=100.0 + r,
                        predicted_goodput_output_tokens_per_s_per_replica=100.0,
                        source="x" * 20000)  # a large file makes a torn write likely without the fix


def _writer(path: str, i: int, start: Any) -> None:
    start.wait()
    for r in range(ROUNDS):
        update_overlay(_entry(i, r), path)


def _reader(path: str, stop: Any, bad: Any, reads: Any) -> None:
    while not stop.is_set():
        try:
            load_overlay(path)
            reads.value += 1
        except SpecError:
            bad.value += 1


def test_eight_concurrent_writers_keep_all_entries_and_readers_never_see_a_torn_file(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    path = str(tmp_path / "overlay.json")
    start, stop = ctx.Barrier(WRITERS), ctx.Event()
    bad, reads = ctx.Value("i", 0), ctx.Value("i", 0)
    reader = ctx.Process(target=_reader, args=(path, stop, bad, reads))
    reader.start()
    writers = [ctx.Process(target=_writer, args=(path, i, start)) for i in range(WRITERS)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(60)
    stop.set()
    reader.join(10)
    assert all(w.exitcode == 0 for w in writers)
    ov = load_overlay(path)
    assert sorted(e.gpu for e in ov.entries) == [f"GPU{i}" for i in range(WRITERS)]
    assert all(e.goodput_scale == 1.0 + (ROUNDS - 1) / 100 for e in ov.entries)
    assert bad.value == 0 and reads.value > 0
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name not in ("overlay.json", "overlay.json.lock"))
    assert leftovers == []  # no temporary file left behind
    print(f"\noverlay race: {WRITERS} writers x {ROUNDS} rounds, {reads.value} reads, {bad.value} torn reads, "
          f"{len(ov.entries)}/{WRITERS} entries kept")


def test_a_failed_write_leaves_the_overlay_byte_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "overlay.json"
    update_overlay(_entry(0, 0), path)
    before = path.read_bytes()

    def boom(fd: int) -> None:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(SpecError, match="cannot write the calibration overlay .*it is unchanged"):
        update_overlay(_entry(1, 0), path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["overlay.json", "overlay.json.lock"]
