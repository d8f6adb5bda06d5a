"""Read a request trace, streaming, in bounded time and memory.

Formats (`llmcap:workload.trace.format`, `auto` picks by the file's first line):
- `azure2023`: CSV `TIMESTAMP,ContextTokens,GeneratedTokens` (Azure/AzurePublicDataset
  `data/AzureLLMInferenceTrace_*.csv`: TIMESTAMP is a UTC wall clock, e.g. `2023-11-16 18:17:03.9799600`).
- `mooncake`: JSON lines `{"timestamp": ms from the start, "input_length", "output_length", "hash_ids"}`
  (kvcache-ai/Mooncake `FAST25-release/traces/*.jsonl`; hash_ids are prefix blocks of 512 tokens).
- `csv` / `jsonl` (generic, e.g. exported from a gateway's logs): `arrival_s` (seconds, any origin,
  non-decreasing), `prompt_tokens`, `output_tokens`, optional `class` (a name) and `prefix_ids`
  (the prompt's leading blocks of `prefix_block_tokens` tokens each, as hashes: CSV space-separated
  integers, JSONL a list). docs/traces.md shows each.

Every problem is one SpecError line naming the file, the row (1 = first line of the file) and the field.
Units: seconds (arrivals, from the first request), tokens.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, Literal

import numpy as np

from sizing.errors import SpecError

TraceFormat = Literal["auto", "azure2023", "mooncake", "csv", "jsonl"]
FORMATS: tuple[str, ...] = ("auto", "azure2023", "mooncake", "csv", "jsonl")
# Mooncake's traces hash prompts in blocks of 512 tokens (kvcache-ai/Mooncake FAST25-release/traces,
# its README, vendored as tests/data/traces/README.md: "remapped prefix-block hashes, 512 tokens a block")
MOONCAKE_BLOCK_TOKENS = 512
MAX_TRACE_BYTES = 256 * 1024 * 1024  # the largest trace read (bytes); a day of a busy gateway fits
MAX_TRACE_REQUESTS = 2_000_000  # most requests one trace may hold
MAX_LINE_BYTES = 1024 * 1024  # the longest row (bytes); a row of binary junk stops here
MAX_TOKENS = 10_000_000  # most prompt or output tokens per request (as the spec's TokenLength)
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
GENERIC_REQUIRED = ("arrival_s", "prompt_tokens", "output_tokens")
GENERIC_COLUMNS = (*GENERIC_REQUIRED, "class", "prefix_ids")


@dataclass(frozen=True)
class Trace:
    """One trace in arrival order. `arrival_s` from the first request (after time_scale);
    `class_index` indexes `class_names` (one "default" class when the trace names none);
    `prefix_ids` per request (None without them or with prefix_reuse off), `block_tokens` each."""

    source: str
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    class_names: tuple[str, ...]
    class_index: np.ndarray
    prefix_ids: list[tuple[int, ...]] | None
    block_tokens: int

    @property
    def requests(self) -> int:
        return int(self.arrival_s.size)


class _Rows:
    """Lines of a file as text, each bounded; errors name the row."""

    def __init__(self, path: Path, f: BinaryIO) -> None:
        self.path, self.f, self.row = path, f, 0

    def fail(self, field: str, why: str) -> SpecError:
        return SpecError(f"trace {self.path.name} row {self.row}: {field}: {why}")

    def __iter__(self) -> _Rows:
        return self

    def __next__(self) -> str:
        raw = self.f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            raise StopIteration
        self.row += 1
        if len(raw) > MAX_LINE_BYTES:
            raise self.fail("row", f"longer than {MAX_LINE_BYTES:,} bytes; not a trace row")
        if b"\0" in raw:
            raise self.fail("row", "binary data (a NUL byte); a trace is CSV or JSON lines text")
        try:
            return raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            raise self.fail("row", "not UTF-8 text; a trace is CSV or JSON lines") from None


def _int(rows: _Rows, field: str, v: object, lo: int = 0) -> int:
    if isinstance(v, bool):
        raise rows.fail(field, f"{v!r} is not a whole number")
    try:
        x = float(v) if isinstance(v, (str, int, float)) else float("nan")
    except ValueError:
        raise rows.fail(field, f"{str(v)[:40]!r} is not a number") from None
    if not (x == x and abs(x) < 1e18) or x != int(x):
        raise rows.fail(field, f"{str(v)[:40]!r} is not a whole number")
    if x < lo or x > MAX_TOKENS:
        raise rows.fail(field, f"{int(x)} is outside {lo}..{MAX_TOKENS:,} tokens")
    return int(x)


def _time(rows: _Rows, field: str, v: object, scale: float) -> float:
    if isinstance(v, bool):
        raise rows.fail(field, f"{v!r} is not a time")
    try:
        x = float(v) if isinstance(v, (str, int, float)) else float("nan")
    except ValueError:
        raise rows.fail(field, f"{str(v)[:40]!r} is not a number") from None
    if not abs(x) < 1e12:
        raise rows.fail(field, f"{str(v)[:40]!r} is not a finite time")
    return x * scale


def _azure_time(rows: _Rows, v: str) -> float:
    s = v.strip()
    head, dot, frac = s.partition(".")
    try:  # seven decimals (100 ns); datetime takes six
        t = datetime.fromisoformat(head + (dot + frac[:6] if dot else ""))
    except ValueError:
        raise rows.fail("TIMESTAMP", f"{s[:40]!r} is not a time like 2023-11-16 18:17:03.9799600") from None
    return t.timestamp()


def _csv_cells(line: str) -> list[str]:
    return [c.strip().strip('"') for c in line.split(",")]


def read_trace(path: str | Path, fmt: str = "auto", time_scale: float = 1.0, prefix_reuse: bool = True,
               prefix_block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> Trace:
    """Read and check a trace. `time_scale` divides the gaps between arrivals (2 = the same requests
    twice as fast, growth planning); `prefix_reuse` False drops prefix ids (what the cache is worth)."""
    p = Path(path)
    if fmt not in FORMATS:
        raise SpecError(f"trace {p.name}: format {fmt!r} is not one of {', '.join(FORMATS)}")
    if not time_scale > 0:
        raise SpecError(f"trace {p.name}: time_scale must be above 0")
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise SpecError(f"trace {p}: no such file; give a path relative to the stack file") from None
    except OSError as e:
        raise SpecError(f"trace {p}: cannot read ({e.__class__.__name__})") from None
    if not os.path.isfile(p):
        raise SpecError(f"trace {p}: not a regular file")
    if st.st_size > MAX_TRACE_BYTES:
        raise SpecError(f"trace {p.name}: {st.st_size / 2**20:,.0f} MiB is above the {MAX_TRACE_BYTES // 2**20} MiB "
                        "a trace may hold; cut it to the busiest hours")
    try:
        with open(p, "rb") as f:
            rows = _Rows(p, f)
            first = next(rows, None)
            if first is None:
                raise SpecError(f"trace {p.name}: empty; a trace needs a header row or JSON lines")
            kind = fmt if fmt != "auto" else _detect(rows, first)
            if kind in ("azure2023", "csv"):
                cols = _csv_cells(first)
                need = AZURE_COLUMNS if kind == "azure2023" else GENERIC_REQUIRED
                missing = [c for c in need if c not in cols]
                if missing:
                    raise rows.fail("header", f"missing column(s) {', '.join(missing)} (has {', '.join(cols)[:80]})")
                lines: _Rows | list[str] = rows
            else:
                lines = [first]
                cols = []
            return _collect(p, kind, rows, lines, cols, time_scale, prefix_reuse, prefix_block_tokens)
    except OSError as e:  # a special file that claims to be regular (/proc/self/mem: EIO), no permission, a disk error
        raise SpecError(f"trace {p}: cannot read ({e.strerror or e.__class__.__name__})") from None


def _detect(rows: _Rows, first: str) -> str:
    s = first.lstrip()
    if s.startswith("{"):
        try:
            obj = json.loads(s)
        except ValueError:
            raise rows.fail("row", "not a JSON object") from None
        return "mooncake" if isinstance(obj, dict) and "input_length" in obj else "jsonl"
    cols = _csv_cells(first)
    if "TIMESTAMP" in cols:
        return "azure2023"
    if "arrival_s" in cols:
        return "csv"
    raise rows.fail("header", "neither an Azure 2023 CSV (TIMESTAMP, ContextTokens, GeneratedTokens), a generic CSV "
                              "(arrival_s, prompt_tokens, output_tokens), nor JSON lines")


def _collect(p: Path, kind: str, rows: _Rows, head: _Rows | list[str], cols: list[str], scale: float,
             reuse: bool, block: int) -> Trace:
    times: list[float] = []
    ins: list[int] = []
    outs: list[int] = []
    cls: list[int] = []
    names: dict[str, int] = {}
    pids: list[tuple[int, ...]] = []
    has_ids = False
    idx = {c: i for i, c in enumerate(cols)}
    it = iter(head) if isinstance(head, list) else head
    extra = rows if isinstance(head, list) else None
    for source in (it, extra) if extra is not None else (it,):
        for line in source:
            if not line.strip():
                continue
            if len(times) >= MAX_TRACE_REQUESTS:
                raise rows.fail("row", f"more than {MAX_TRACE_REQUESTS:,} requests; cut the trace")
            rec = _record(rows, kind, line, idx)
            t = rec[0]
            if times and t < times[-1]:
                field = {"azure2023": "TIMESTAMP", "mooncake": "timestamp"}.get(kind, "arrival_s")
                raise rows.fail(field, "earlier than the row before; sort the trace by arrival time")
            times.append(t)
            ins.append(_int(rows, rec[1][0], rec[1][1], 1))
            outs.append(_int(rows, rec[2][0], rec[2][1], 1))
            name = rec[3]
            cls.append(names.setdefault(name, len(names)))
            ids = rec[4]
            has_ids |= bool(ids)
            pids.append(ids)
    if not times:
        raise SpecError(f"trace {p.name}: no requests")
    arr = np.asarray(times, dtype=float)
    arr = (arr - arr[0]) / scale
    return Trace(source=p.name, arrival_s=arr, prompt_tokens=np.asarray(ins, dtype=np.int64),
                 output_tokens=np.asarray(outs, dtype=np.int64), class_names=tuple(names),
                 class_index=np.asarray(cls, dtype=np.int64), prefix_ids=pids if (has_ids and reuse) else None,
                 block_tokens=MOONCAKE_BLOCK_TOKENS if kind == "mooncake" else block)


Rec = tuple[float, tuple[str, object], tuple[str, object], str, tuple[int, ...]]


def _record(rows: _Rows, kind: str, line: str, idx: dict[str, int]) -> Rec:
    if kind in ("azure2023", "csv"):
        cells = _csv_cells(line)
        if len(cells) < len(idx):
            raise rows.fail("row", f"{len(cells)} cells for {len(idx)} columns")
        if kind == "azure2023":
            return (_azure_time(rows, cells[idx["TIMESTAMP"]]), ("ContextTokens", cells[idx["ContextTokens"]]),
                    ("GeneratedTokens", cells[idx["GeneratedTokens"]]), "default", ())
        name = cells[idx["class"]] if "class" in idx else ""
        ids = _ids(rows, cells[idx["prefix_ids"]].split()) if "prefix_ids" in idx else ()
        return (_time(rows, "arrival_s", cells[idx["arrival_s"]], 1.0), ("prompt_tokens", cells[idx["prompt_tokens"]]),
                ("output_tokens", cells[idx["output_tokens"]]), name or "default", ids)
    try:
        obj = json.loads(line)
    except ValueError:
        raise rows.fail("row", "not a JSON object") from None
    if not isinstance(obj, dict):
        raise rows.fail("row", "not a JSON object")
    keys = ("timestamp", "input_length", "output_length") if kind == "mooncake" else GENERIC_REQUIRED
    for k in keys:
        if k not in obj:
            raise rows.fail(k, "missing")
    raw_ids = obj.get("hash_ids" if kind == "mooncake" else "prefix_ids") or []
    if not isinstance(raw_ids, list):
        raise rows.fail("hash_ids" if kind == "mooncake" else "prefix_ids", "must be a list of integers")
    name = obj.get("class", "default") if kind == "jsonl" else "default"
    if not isinstance(name, str) or not name:
        raise rows.fail("class", "must be a non-empty name")
    t = _time(rows, keys[0], obj[keys[0]], 1e-3 if kind == "mooncake" else 1.0)  # Mooncake: ms
    return (t, (keys[1], obj[keys[1]]), (keys[2], obj[keys[2]]), name, _ids(rows, raw_ids))


def _ids(rows: _Rows, raw: Sequence[object]) -> tuple[int, ...]:
    out = []
    for v in raw:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise rows.fail("prefix ids", f"{str(v)[:40]!r} is not an integer")
        try:
            out.append(int(v))
        except ValueError:
            raise rows.fail("prefix ids", f"{str(v)[:40]!r} is not an integer") from None
    return tuple(out)
