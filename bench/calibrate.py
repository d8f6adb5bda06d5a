"""Fit the performance model's constants to published measurements and write
sizing/data/perf_calibration.json (the only writer of that file).

Reads both calibration files (bench/calibration/perf_points.csv and perf_points_2026.csv, or
the paths given), fits the ~20 bounded physical constants of sizing.catalog.calibration.PARAMS by
prior-regularised robust least squares (bench/fitting.py), records for each its prior, bounds,
fitted value and the sources that pin it, then refits once per source left out
(leave-one-source-out) to record the held-out error and the p10-p90 goodput range the planner
shows.

Usage: python bench/calibrate.py [CSV ...] [--out FILE] [--no-holdout]
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.accuracy import goodput_range, held_out, summarize  # noqa: E402
from bench.calib_rows import BENCHMARK_ASSUMPTIONS, load_rows  # noqa: E402
from bench.fitting import PRIOR_WEIGHT, fit, pinned_by, predictions  # noqa: E402
from sizing.catalog.calibration import CALIBRATION_FILE, PARAMS, override_calibration  # noqa: E402
from sizing.catalog.lookup import load_catalog  # noqa: E402


def _round(d: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in d.items()}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="*")
    ap.add_argument("--out", default=str(CALIBRATION_FILE))
    ap.add_argument("--no-holdout", action="store_true")
    a = ap.parse_args(argv)
    catalog = load_catalog()
    rows = [r for p in a.csv for r in load_rows(catalog, p)] if a.csv else load_rows(catalog)
    hold: dict[str, Any] = {}
    g_range = (1.0, 1.0)
    if not a.no_holdout:
        loso = held_out(catalog, rows, lambda r: r.source)
        s = summarize(loso)
        hold = {"per_source": {k: _round(v) for k, v in s.items() if k != "overall"},
                "median_of_source_medians": _round(s["overall"])}
        g_range = goodput_range(loso)
    values, cost = fit(catalog, rows)
    pred = predictions(catalog, rows, values)
    ins = summarize([(r, float(p), abs(p - r.value) / r.value) for r, p in zip(rows, pred, strict=True)])
    pins = pinned_by(catalog, rows, values)
    params = {}
    for n, spec in PARAMS.items():
        if spec.fixed:  # not fitted: the prior, and why
            params[n] = {"value": spec.prior, "prior": spec.prior, "bounds": [spec.lo, spec.hi], "unit": spec.unit,
                         "meaning": spec.meaning, "pinned_by": [], "at_bound": False, "fixed": spec.fixed}
            continue
        v = values[n]
        params[n] = {"value": round(v, 4), "prior": spec.prior, "bounds": [spec.lo, spec.hi], "unit": spec.unit,
                     "meaning": spec.meaning, "pinned_by": pins[n],
                     "at_bound": bool(abs(v - spec.lo) < 1e-3 * spec.lo or abs(v - spec.hi) < 1e-3 * spec.hi)}
    headline = hold.get("median_of_source_medians", {})
    doc = {
        "what": "fitted constants of the performance model (sizing/perf/step.py, sizing/perf/load.py); written by "
                "bench/calibrate.py, do not edit by hand",
        "fitted_on": dt.date.today().isoformat(),
        "source_file": "bench/calibration/perf_points.csv + perf_points_2026.csv (published benchmarks; see "
                       "their README)",
        "rows": len(rows),
        "method": "scipy least_squares (soft-L1, bounded, in log space) on log(pred/meas); each (source, metric "
                  f"group) weighs equally; prior penalty {PRIOR_WEIGHT} x log(value/prior)/sigma per constant",
        "cost": round(cost, 5),
        "parameters": params,
        "goodput_range": {"p10": round(g_range[0], 3), "p90": round(g_range[1], 3),
                          "what": "p10/p90 of measured / predicted throughput over leave-one-source-out rows, "
                                  "each source weighted equally; Goodput multiplies by these"},
        "benchmark_assumptions": copy.deepcopy(BENCHMARK_ASSUMPTIONS),
        "fit_error": {
            "held_out": {g: headline[g] for g in ("throughput", "ttft", "itl", "e2e") if g in headline},
            "leave_one_source_out": hold,
            "in_sample": {"per_source": {k: _round(v) for k, v in ins.items() if k != "overall"},
                          "median_of_source_medians": _round(ins["overall"])},
            "overall": {g: round(ins["overall"][g], 4) for g in ("throughput", "ttft", "itl", "e2e")
                        if g in ins["overall"]},
        },
    }
    override_calibration(None)
    out = Path(a.out)
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out} (cost {cost:.4f})")
    for n, p in params.items():
        print(f"  {n:34} {p['value']:>9.4g}  prior {p['prior']:<7g} {'AT BOUND ' if p['at_bound'] else ''}"
              + (f"FIXED: {p['fixed']}" if p.get("fixed") else
                 f"pinned by {', '.join(p['pinned_by']) or '(prior only)'}"))
    print("held out (median of per-source medians):", {g: f"{v:.1%}" for g, v in doc["fit_error"]["held_out"].items()})
    print("in sample:", {g: f"{v:.1%}" for g, v in doc["fit_error"]["overall"].items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
