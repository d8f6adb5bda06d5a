"""Fit the performance model's efficiency constants to published measurements.

Reads ../shared/calibration/perf_points.csv (or the path given), fits a handful of physical
constants (memory-bandwidth and compute efficiency per GPU generation, an efficiency factor and a
per-step overhead per engine, the weight-only dequantization penalty, all-reduce latency and link
efficiency per interconnect, and an effective compute figure for the A10G, which has no datasheet
one) by coordinate search in log space, and writes sizing/data/perf_calibration.json with the fit
date, the source file, the values, the benchmark assumptions and the fit error.

Loss: mean over (source, metric group) of the mean |log(predicted / measured)|, so each source
counts equally (as in bench/accuracy.py) and no single row can dominate.

Usage: python bench/calibrate.py [PATH_TO_perf_points.csv] [--out FILE] [--rounds N]
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.accuracy import row_errors, summarize  # noqa: E402
from bench.calib_rows import BENCHMARK_ASSUMPTIONS, DEFAULT_CSV, CalRow, load_rows, metric_group, predict  # noqa: E402
from sizing import perf  # noqa: E402
from sizing.catalog import Catalog, load_catalog  # noqa: E402
from sizing.perf_calibration import CALIBRATION_FILE, calibration_from_dict, override_calibration  # noqa: E402

# (section, key): (start, lower bound, upper bound). Starting points are generic round numbers, not
# vendor figures; the fit moves them.
PARAMS: dict[tuple[str, str], tuple[float, float, float]] = {
    ("bandwidth_efficiency", "Ampere"): (0.8, 0.3, 0.95),
    ("bandwidth_efficiency", "Ada"): (0.8, 0.3, 0.95),
    ("bandwidth_efficiency", "Hopper"): (0.8, 0.3, 0.95),
    ("compute_efficiency", "Ampere"): (0.5, 0.1, 0.95),
    ("compute_efficiency", "Ada"): (0.5, 0.1, 0.95),
    ("compute_efficiency", "Hopper"): (0.5, 0.1, 0.95),
    ("engine_efficiency", "vllm"): (0.9, 0.3, 1.2),
    ("engine_efficiency", "sglang"): (0.9, 0.3, 1.2),
    ("engine_efficiency", "tgi"): (0.7, 0.2, 1.2),
    ("step_overhead_ms", "tensorrt-llm"): (1.0, 0.05, 20.0),
    ("step_overhead_ms", "vllm"): (2.0, 0.05, 20.0),
    ("step_overhead_ms", "sglang"): (2.0, 0.05, 20.0),
    ("step_overhead_ms", "tgi"): (5.0, 0.05, 50.0),
    ("step_overhead_per_seq_us", "tensorrt-llm"): (5.0, 0.1, 200.0),
    ("step_overhead_per_seq_us", "vllm"): (20.0, 0.1, 200.0),
    ("step_overhead_per_seq_us", "sglang"): (20.0, 0.1, 200.0),
    ("step_overhead_per_seq_us", "tgi"): (20.0, 0.1, 500.0),
    ("roofline_sharpness", ""): (4.0, 1.0, 16.0),
    ("weight_only_compute_efficiency", ""): (0.8, 0.2, 1.0),
    ("allreduce_latency_us", "nvlink"): (3.0, 0.2, 100.0),
    ("allreduce_latency_us", "pcie"): (10.0, 0.2, 1000.0),
    ("interconnect_efficiency", "nvlink"): (0.7, 0.1, 1.0),
    ("interconnect_efficiency", "pcie"): (0.7, 0.05, 1.0),
    ("fitted_compute_tflops", "A10G"): (50.0, 5.0, 400.0),
}
FITTED_GENERATIONS = ("Ampere", "Ada", "Hopper")


def params_to_dict(values: dict[tuple[str, str], float]) -> dict[str, Any]:
    p: dict[str, Any] = defaultdict(dict)
    for (sec, key), v in values.items():
        if sec in ("weight_only_compute_efficiency", "roofline_sharpness"):
            p[sec] = v
        elif sec == "fitted_compute_tflops":
            p[sec][key] = {"value": round(v, 2), "unit": "TFLOPS (dense 16-bit, per GPU)",
                           "note": "no NVIDIA datasheet for the A10G: effective peak fitted from the hfsm "
                                   "A10G measurements, used in place of a datasheet figure"}
        else:
            p[sec][key] = v
    p["engine_efficiency"]["tensorrt-llm"] = 1.0  # the reference engine
    for sec in ("bandwidth_efficiency", "compute_efficiency"):
        fitted = [p[sec][g] for g in FITTED_GENERATIONS]
        p[sec]["default"] = math.exp(statistics.fmean(math.log(v) for v in fitted))
    p["step_overhead_ms"]["default"] = p["step_overhead_ms"]["vllm"]
    p["step_overhead_per_seq_us"]["default"] = p["step_overhead_per_seq_us"]["vllm"]
    return dict(p)


def loss(catalog: Catalog, rows: list[CalRow], values: dict[tuple[str, str], float]) -> float:
    override_calibration(calibration_from_dict({"parameters": params_to_dict(values)}))
    perf.clear_caches()
    acc: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        p = max(predict(catalog, r), 1e-9)
        acc[(r.source, metric_group(r.metric))].append(abs(math.log(p / r.value)))
    return statistics.fmean(statistics.fmean(v) for v in acc.values())


def fit(catalog: Catalog, rows: list[CalRow], rounds: int = 5) -> tuple[dict[tuple[str, str], float], float]:
    values = {k: v[0] for k, v in PARAMS.items()}
    best = loss(catalog, rows, values)
    step = math.log(1.6)
    for _ in range(rounds):
        for k, (_, lo, hi) in PARAMS.items():
            for f in (-1.0, -0.5, -0.25, 0.25, 0.5, 1.0):
                trial = dict(values)
                trial[k] = min(max(values[k] * math.exp(f * step), lo), hi)
                if trial[k] == values[k]:
                    continue
                cur = loss(catalog, rows, trial)
                if cur < best - 1e-6:
                    best, values = cur, trial
        step *= 0.5
    return values, best


def holdout(catalog: Catalog, rows: list[CalRow], rounds: int) -> dict[str, float]:
    """Fit without the rows of models other than the 7-8B class in trt013, then report the error on
    those held-out rows: a check that the constants transfer to models they were not fitted on."""
    held = [r for r in rows if r.source == "trt013" and r.cfg.model.params_total_b > 20]
    train = [r for r in rows if r not in held]
    values, _ = fit(catalog, train, rounds)
    loss(catalog, train, values)
    errs = row_errors(catalog, held)
    return {"held_out_rows": len(held),
            "throughput_median_ape": round(statistics.median(e for _, _, e in errs), 4),
            "what": "trt013 rows of 46-405B models (Llama-2/3.1 70B, 405B, Mixtral), fitted on the rest"}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?", default=str(DEFAULT_CSV))
    ap.add_argument("--out", default=str(CALIBRATION_FILE))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-holdout", action="store_true")
    a = ap.parse_args(argv)
    path, out, rounds = Path(a.csv), Path(a.out), a.rounds
    catalog = load_catalog()
    rows = load_rows(catalog, path)
    hold = holdout(catalog, rows, rounds) if not a.no_holdout else {}
    values, best = fit(catalog, rows, rounds)
    loss(catalog, rows, values)
    summ = summarize(row_errors(catalog, rows))
    doc = {
        "what": "fitted efficiency constants of sizing/perf.py; written by bench/calibrate.py, do not edit by hand",
        "fitted_on": dt.date.today().isoformat(),
        "source_file": "../shared/calibration/perf_points.csv (published benchmarks; see its README)",
        "rows": len(rows),
        "method": "coordinate search in log space; loss = mean over (source, metric group) of mean |log(pred/meas)|",
        "loss": round(best, 4),
        "parameters": params_to_dict({k: round(v, 4) for k, v in values.items()}),
        "units": {"bandwidth_efficiency": "fraction of datasheet memory bandwidth",
                  "compute_efficiency": "fraction of datasheet dense tensor peak",
                  "engine_efficiency": "multiplier on both efficiencies (tensorrt-llm = 1)",
                  "step_overhead_ms": "ms per engine step",
                  "step_overhead_per_seq_us": "us per running sequence per engine step",
                  "roofline_sharpness": "a in (mem^a + compute^a)^(1/a); large = perfect overlap",
                  "allreduce_latency_us": "us per ring hop (an all-reduce over tp GPUs has 2(tp-1) hops)",
                  "interconnect_efficiency": "fraction of per-direction link bandwidth",
                  "weight_only_compute_efficiency": "multiplier on compute efficiency for dequantizing kernels"},
        "generations_without_data": "Turing and Blackwell use `default` (geometric mean of the fitted ones)",
        "benchmark_assumptions": copy.deepcopy(BENCHMARK_ASSUMPTIONS),
        "fit_error": {"median_abs_pct_error": {s: {g: round(v, 4) for g, v in gs.items()} for s, gs in summ.items()},
                      "overall": {g: round(v, 4) for g, v in summ["overall"].items()}, "holdout": hold},
    }
    override_calibration(None)
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} (loss {best:.4f})")
    for (sec, key), v in values.items():
        print(f"  {sec}{'.' + key if key else ''} = {v:.4g}")
    print("overall median abs. % error:", {g: f"{v:.1%}" for g, v in summ["overall"].items()})
    if hold:
        print("hold-out:", hold)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
