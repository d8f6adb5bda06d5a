"""Evaluation sets for the quality gate (`llmcap eval`): JSONL of questions with answers, the final-answer
convention of GSM8K (`#### N` after the worked solution), exact match of that final answer, and the
statistics the gate reports (Wilson intervals for each accuracy, a paired interval for the drop).

Owns: reading a set, extracting and normalising final answers, the statistics. Pure: no network.
Units: accuracies and drops are shares 0..1 here; the CLI prints points (percent).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from sizing.errors import SpecError
from sizing.user_files import read_user_file

BUNDLED_GSM8K = Path(__file__).resolve().parents[1] / "data" / "evalsets" / "gsm8k_test.jsonl"
MAX_EVALSET_BYTES = 64 * 2**20
Z_95 = 1.959964  # two-sided 95 % normal quantile

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_FINAL = re.compile(r"####\s*(.+)")


@dataclass(frozen=True)
class EvalItem:
    id: str
    question: str
    answer: str  # the normalised final answer


def normalise(text: str) -> str:
    """The comparable form of a final answer: the first number, commas, $ and trailing zeros dropped
    ("$1,200.00" -> "1200"); text without a number is lower-cased and stripped."""
    m = _NUMBER.search(text.replace("$", ""))
    if not m:
        return text.strip().lower().rstrip(".")
    s = m.group(0).replace(",", "")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s[:-2] if s.endswith(".0") else (s if s not in ("-0", "") else "0")


def final_answer(text: str) -> str | None:
    """A completion's final answer: what follows the last `####`, else the last number in it (None: none)."""
    marks = _FINAL.findall(text)
    if marks:
        return normalise(marks[-1])
    nums = _NUMBER.findall(text.replace("$", ""))
    return normalise(nums[-1]) if nums else None


def load_evalset(path: Path | None = None, limit: int | None = None) -> list[EvalItem]:
    """Items of a JSONL file (`question` and `answer` per line; `id` optional, else the line number);
    the bundled GSM8K test set by default. `answer` may be a worked solution ending in `#### N`."""
    p = path or BUNDLED_GSM8K
    text = read_user_file(p, "evaluation set", "a JSONL file with question and answer on each line",
                          max_bytes=MAX_EVALSET_BYTES)
    items: list[EvalItem] = []
    seen: set[str] = set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise SpecError(f"{p}:{n}: not JSON ({e.msg}); each line must be {{\"question\": ..., \"answer\": ...}}") \
                from None
        if not isinstance(row, dict) or not isinstance(row.get("question"), str) \
                or not isinstance(row.get("answer"), (str, int, float)):
            raise SpecError(f"{p}:{n}: needs a string \"question\" and an \"answer\"")
        ans = str(row["answer"])
        marked = _FINAL.findall(ans)
        item_id = str(row.get("id", n))
        if item_id in seen:
            raise SpecError(f"{p}:{n}: id {item_id!r} appears twice")
        seen.add(item_id)
        items.append(EvalItem(item_id, row["question"], normalise(marked[-1] if marked else ans)))
        if limit is not None and len(items) >= limit:
            break
    if not items:
        raise SpecError(f"{p}: no questions")
    return items


def wilson(correct: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a binomial share, (low, high)."""
    if n == 0:
        return (0.0, 1.0)
    p = correct / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, centre - half), min(1.0, centre + half))


def paired_drop(reference: list[bool], candidate: list[bool], z: float = Z_95) -> tuple[float, float, float]:
    """Reference accuracy minus candidate accuracy on the same items, with a normal interval on the
    per-item differences (a paired test: items both get right or both get wrong add no variance)."""
    n = len(reference)
    if n == 0 or n != len(candidate):
        raise SpecError("paired drop needs the same items from both endpoints")
    diffs = [int(r) - int(c) for r, c in zip(reference, candidate, strict=True)]
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1) if n > 1 else 0.0
    half = z * math.sqrt(var / n)
    return (mean, mean - half, mean + half)
