"""Out-of-sample accuracy of the performance model on both calibration files.

Prints FIRST leave-one-source-out error (refit the constants without a source, predict that
source's rows) per source and the median of per-source medians, for throughput, TTFT, ITL/TPOT
and E2E at each statistic the rows give (mean, median, p95, p99); then leave-one-GPU-out; then
the in-sample error of the bundled calibration (sizing/data/perf_calibration.json).

Usage: python bench/accuracy.py [CSV ...] [--rows] [--in-sample-only] [--no-gpu]
A full run refits 12 + 7 times: minutes on one core.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.calib_rows import CalRow, load_rows, metric_group, predict  # noqa: E402
from bench.fitting import fit, predictions  # noqa: E402
from sizing.catalog.calibration import override_calibration  # noqa: E402
from sizing.catalog.lookup import Catalog, load_catalog  # noqa: E402

GROUPS = ("throughput", "ttft", "itl", "e2e")
STATS = ("mean", "p50", "p95", "p99")
TARGETS = {"throughput": 0.15, "ttft": 0.20, "itl": 0.20}

Err = list[tuple[CalRow, float, float]]  # (row, prediction, |pred - meas| / meas)


def row_errors(catalog: Catalog, rows: list[CalRow]) -> Err:
    """(row, prediction, absolute percentage error as a fraction) with the bundled calibration."""
    out = []
    for r in rows:
        p = predict(catalog, r)
        out.append((r, p, abs(p - r.value) / r.value))
    return out


def summarize(errs: Err, key: Callable[[CalRow], str] = lambda r: r.source) -> dict[str, dict[str, float]]:
    """{source: {group: median APE}} plus "overall" (median of per-source medians). Keys
    "group/stat" hold the same per statistic."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r, _, e in errs:
        g = metric_group(r.metric)
        acc[key(r)][g].append(e)
        acc[key(r)][f"{g}/{r.stat}"].append(e)
    out = {s: {g: statistics.median(v) for g, v in gs.items()} for s, gs in acc.items()}
    cells = sorted({g for gs in out.values() for g in gs})
    out["overall"] = {g: statistics.median([out[s][g] for s in acc if g in out[s]]) for g in cells}
    return out


def held_out(catalog: Catalog, rows: list[CalRow], key: Callable[[CalRow], str], log: bool = True) -> Err:
    """Refit without each group of rows (by `key`) and predict that group: every row's held-out error."""
    out: Err = []
    for g in sorted({key(r) for r in rows}):
        t = time.time()
        train = [r for r in rows if key(r) != g]
        test = [r for r in rows if key(r) == g]
        values, _ = fit(catalog, train)
        pred = predictions(catalog, test, values)
        out += [(r, float(p), abs(p - r.value) / r.value) for r, p in zip(test, pred, strict=True)]
        if log:
            print(f"  refit without {g:12} ({len(train)} rows) and predicted its {len(test)}: {time.time() - t:.0f} s",
                  file=sys.stderr)
    override_calibration(None)
    return out


def _counts(errs: Err, key: Callable[[CalRow], str]) -> dict[str, dict[str, int]]:
    c: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r, _, _ in errs:
        c[key(r)][metric_group(r.metric)] += 1
    return c


def print_table(title: str, errs: Err, key: Callable[[CalRow], str] = lambda r: r.source) -> dict[str, float]:
    summ, counts = summarize(errs, key), _counts(errs, key)
    print(title)
    print(f"{'':12}" + "".join(f"{g:>17}" for g in GROUPS))
    for s in sorted(k for k in summ if k != "overall"):
        cells = [f"{summ[s][g]:6.1%} (n={counts[s][g]:3})" if g in summ[s] else "" for g in GROUPS]
        print(f"{s:12}" + "".join(f"{c:>17}" for c in cells))
    o = summ["overall"]
    print(f"{'median':12}" + "".join(f"{o[g]:>17.1%}" if g in o else f"{'':>17}" for g in GROUPS))
    print("  by statistic (median of per-source medians): " + "; ".join(
        f"{g} " + ", ".join(f"{st} {o[f'{g}/{st}']:.1%}" for st in STATS if f"{g}/{st}" in o) for g in GROUPS))
    return o


def goodput_range(errs: Err) -> tuple[float, float]:
    """p10 and p90 of measured / predicted throughput over held-out rows, each source weighted equally."""
    per: dict[str, list[float]] = defaultdict(list)
    for r, p, _ in errs:
        if metric_group(r.metric) == "throughput" and p > 0:
            per[r.source].append(r.value / p)
    vals, wts = [], []
    for v in per.values():
        vals += v
        wts += [1.0 / len(v)] * len(v)
    order = np.argsort(vals)
    cw = np.cumsum(np.array(wts)[order]) / sum(wts)
    sv = np.array(vals)[order]
    return float(sv[np.searchsorted(cw, 0.10)]), float(sv[np.searchsorted(cw, 0.90)])


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv if not a.startswith("--")]
    catalog = load_catalog()
    rows = [r for p in paths for r in load_rows(catalog, p)] if paths else load_rows(catalog)
    names = ", ".join(p.name for p in paths) if paths else "perf_points.csv + perf_points_2026.csv"
    ok = True
    if "--in-sample-only" not in argv:
        loso = held_out(catalog, rows, lambda r: r.source)
        o = print_table(f"LEAVE-ONE-SOURCE-OUT median absolute % error on {names} ({len(rows)} rows): "
                        "refit without the source, predict it", loso)
        ok = all(o.get(g, 1.0) <= t for g, t in TARGETS.items())
        print("targets (held out: throughput <= 15%, TTFT <= 20%, ITL/TPOT <= 20%):", "met" if ok else "NOT met")
        lo, hi = goodput_range(loso)
        print(f"held-out measured/predicted throughput: p10 {lo:.2f}, p90 {hi:.2f}")
        if "--no-gpu" not in argv:
            print()
            logo = held_out(catalog, rows, lambda r: r.gpu)
            print_table("LEAVE-ONE-GPU-OUT (per GPU type)", logo, lambda r: r.gpu)
        print()
    errs = row_errors(catalog, rows)
    if "--rows" in argv:
        for r, p, e in errs:
            print(f"{r.id:16} {r.metric:18} {r.stat:5} measured {r.value:10.1f} predicted {p:10.1f}  err {e:6.1%}")
    print_table("in-sample (bundled calibration, fitted on all rows): NOT an accuracy claim", errs)
    return 0 if ok or "--in-sample-only" in argv else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
