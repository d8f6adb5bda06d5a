"""Fit the performance model's constants to published measurements and write
sizing/data/perf_calibration.json (the only writer of that file).

Reads the calibration files (bench/calibration/perf_points*.csv, or the paths given), fits the ~20
bounded physical constants of sizing.catalog.calibration.PARAMS by prior-regularised robust least
squares (bench/fitting.py), records for each its prior, bounds, fitted value and the sources that pin
it, then refits once per publisher/harness group left out (bench/source_groups.csv,
leave-one-group-out) to record the held-out error and the p10-p90 goodput range the planner shows.

Usage: python bench/calibrate.py [CSV ...] [--out FILE] [--no-holdout] [--holdout-only] [--jobs N]
--holdout-only keeps the constants of the file at --out and rewrites only its held-out error and
goodput range (the grouped validation of the current physics, without moving any constant).
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

from bench.accuracy import goodput_range, group_key, held_out, summarize  # noqa: E402
from bench.calib_rows import BENCHMARK_ASSUMPTIONS, load_rows  # noqa: E402
from bench.fitting import PRIOR_CELLS, ROW_SCALE, fit, pinned_by, predictions  # noqa: E402
from sizing.catalog.calibration import CALIBRATION_FILE, PARAMS, override_calibration  # noqa: E402
from sizing.catalog.lookup import load_catalog  # noqa: E402

GOODPUT_RANGE_WHAT = ("p10/p90 of measured / predicted throughput over leave-one-group-out rows (sources grouped by "
                      "publisher/harness, bench/source_groups.csv), each group weighted equally; Goodput, the plan's "
                      "replicas and its GPU and $/month ranges multiply by these")


def _round(d: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in d.items()}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="*")
    ap.add_argument("--out", default=str(CALIBRATION_FILE))
    ap.add_argument("--no-holdout", action="store_true")
    ap.add_argument("--holdout-only", action="store_true")
    ap.add_argument("--jobs", type=int, default=1, help="refits at once (at most 2)")
    a = ap.parse_args(argv)
    catalog = load_catalog()
    rows = [r for p in a.csv for r in load_rows(catalog, p)] if a.csv else load_rows(catalog)
    hold: dict[str, Any] = {}
    g_range = (1.0, 1.0)
    if not a.no_holdout:
        key = group_key()
        logo = held_out(catalog, rows, key, jobs=a.jobs)
        s = summarize(logo, key)
        hold = {"per_group": {k: _round(v) for k, v in s.items() if k != "overall"},
                "median_of_group_medians": _round(s["overall"]), "rows": len(rows),
                "groups": "bench/source_groups.csv (sources by publisher/harness)"}
        g_range = goodput_range(logo, key)
    if a.holdout_only:
        return _write_holdout(Path(a.out), hold, g_range)
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
    headline = hold.get("median_of_group_medians", {})
    doc = {
        "what": "fitted constants of the performance model (sizing/perf/step.py, sizing/perf/load.py); written by "
                "bench/calibrate.py, do not edit by hand",
        "fitted_on": dt.date.today().isoformat(),
        "source_file": "bench/calibration/perf_points.csv + perf_points_2026.csv + perf_points_2026_ext.csv "
                       "(published benchmarks; see their README)",
        "rows": len(rows),
        "method": f"scipy least_squares (bounded, in log space) on log(pred/meas), soft-L1 per row with its knee at "
                  f"|log(pred/meas)| = {ROW_SCALE} (the 18 % latency target; the same in every cell); each "
                  "(publisher group, metric group) weighs equally (bench/source_groups.csv: the validation's unit of "
                  "evidence; pages of one lab and harness are not independent, so they share one group's weight "
                  "instead of each weighing as much as another publisher); prior penalty log(value/prior)/sigma per "
                  f"constant, all constants together weighing as much as {PRIOR_CELLS:.2f} (group, metric group) cells",
        "cost": round(cost, 5),
        "parameters": params,
        "goodput_range": {"p10": round(g_range[0], 3), "p90": round(g_range[1], 3),
                          "what": GOODPUT_RANGE_WHAT},
        "benchmark_assumptions": copy.deepcopy(BENCHMARK_ASSUMPTIONS),
        "fit_error": {
            "held_out": {g: headline[g] for g in ("throughput", "ttft", "itl", "e2e") if g in headline},
            "leave_one_group_out": hold,
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
    print("held out (median of per-group medians):", {g: f"{v:.1%}" for g, v in doc["fit_error"]["held_out"].items()})
    print("in sample:", {g: f"{v:.1%}" for g, v in doc["fit_error"]["overall"].items()})
    return 0


def _write_holdout(out: Path, hold: dict[str, Any], g_range: tuple[float, float]) -> int:
    """Rewrite only the held-out error and the goodput range of the calibration file at `out`."""
    doc = json.loads(out.read_text(encoding="utf-8"))
    headline = hold["median_of_group_medians"]
    doc["goodput_range"] = {"p10": round(g_range[0], 3), "p90": round(g_range[1], 3),
                            "what": GOODPUT_RANGE_WHAT}
    fe = doc.setdefault("fit_error", {})
    fe.pop("leave_one_source_out", None)
    fe["held_out"] = {g: headline[g] for g in ("throughput", "ttft", "itl", "e2e") if g in headline}
    fe["leave_one_group_out"] = {**hold, "validated_on": dt.date.today().isoformat(),
                                 "what": "the constants above, refitted without each group and scored on it"}
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote the held-out error and goodput range of {out}: p10 {g_range[0]:.2f}, p90 {g_range[1]:.2f}; "
          "held out (median of per-group medians):", {g: f"{v:.1%}" for g, v in fe["held_out"].items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
