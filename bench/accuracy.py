"""Predict every row of the calibration CSV and print median absolute percentage error per source
and overall (the median of per-source medians) for throughput, TTFT and ITL/TPOT.

Usage: python bench/accuracy.py [PATH_TO_perf_points.csv] [--rows]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.calib_rows import DEFAULT_CSV, CalRow, load_rows, metric_group, predict  # noqa: E402
from sizing.catalog import Catalog, load_catalog  # noqa: E402

GROUPS = ("throughput", "ttft", "itl", "e2e")
TARGETS = {"throughput": 0.15, "ttft": 0.20, "itl": 0.20}


def row_errors(catalog: Catalog, rows: list[CalRow]) -> list[tuple[CalRow, float, float]]:
    """(row, prediction, absolute percentage error as a fraction)."""
    out = []
    for r in rows:
        p = predict(catalog, r)
        out.append((r, p, abs(p - r.value) / r.value))
    return out


def summarize(errs: list[tuple[CalRow, float, float]]) -> dict[str, dict[str, float]]:
    """{source: {group: median APE}} plus an "overall" entry (median of per-source medians)."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r, _, e in errs:
        acc[r.source][metric_group(r.metric)].append(e)
    out = {s: {g: statistics.median(v) for g, v in gs.items()} for s, gs in acc.items()}
    out["overall"] = {g: statistics.median([out[s][g] for s in acc if g in out[s]])
                      for g in GROUPS if any(g in out[s] for s in acc)}
    return out


def _counts(errs: list[tuple[CalRow, float, float]]) -> dict[str, dict[str, int]]:
    c: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r, _, _ in errs:
        c[r.source][metric_group(r.metric)] += 1
    return c


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    path = Path(args[0]) if args else DEFAULT_CSV
    catalog = load_catalog()
    errs = row_errors(catalog, load_rows(catalog, path))
    if "--rows" in argv:
        for r, p, e in errs:
            print(f"{r.id:16} {r.metric:18} measured {r.value:10.1f} predicted {p:10.1f}  err {e:6.1%}")
    summ, counts = summarize(errs), _counts(errs)
    print(f"median absolute percentage error on {path.name} ({len(errs)} rows)")
    print(f"{'source':12}" + "".join(f"{g:>18}" for g in GROUPS))
    for s in sorted(k for k in summ if k != "overall"):
        cells = [f"{summ[s][g]:7.1%} (n={counts[s][g]:3})" if g in summ[s] else "" for g in GROUPS]
        print(f"{s:12}" + "".join(f"{c:>18}" for c in cells))
    o = summ["overall"]
    print(f"{'overall':12}" + "".join(f"{o[g]:>18.1%}" if g in o else f"{'':>18}" for g in GROUPS))
    ok = all(o.get(g, 0.0) <= t for g, t in TARGETS.items())
    print("targets (throughput <= 15%, TTFT <= 20%, ITL/TPOT <= 20%):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
