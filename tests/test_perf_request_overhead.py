"""`request_overhead_ms` is the TTFT a request pays outside the GPU at low load (HTTP, chat template and
tokenization, hand-off to the engine, the first chunk's way back). Its prior must not exceed what the
rows that isolate it leave for it: ree2raz's vLLM one-user medians (client in the server's container,
`SERVER_URL = "http://localhost:8000"`, bench_lib.py), measured p50 TTFT less the model's GPU time
(prefill and step) with the overhead at its floor."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench.calib_rows import load_rows, metric_group, predict
from sizing.catalog.calibration import PARAMS, calibration_from_dict, override_calibration
from sizing.catalog.lookup import load_catalog
from sizing.perf import load as perf

CALIBRATION = Path(__file__).resolve().parents[1] / "sizing" / "data" / "perf_calibration.json"


def test_request_overhead_prior_within_low_load_residual() -> None:
    cat = load_catalog()
    rows = [r for r in load_rows(cat) if r.source == "r2rz" and r.cfg.engine == "vllm"
            and metric_group(r.metric) == "ttft" and r.stat == "p50" and r.load <= 1]
    assert len(rows) >= 6
    floor = PARAMS["request_overhead_ms"].lo
    values = {n: v["value"] for n, v in json.loads(CALIBRATION.read_text())["parameters"].items()}
    override_calibration(calibration_from_dict({"parameters": {**values, "request_overhead_ms": floor}}))
    perf.clear_caches()
    try:
        implied = statistics.median(r.value - predict(cat, r) + floor for r in rows)
    finally:
        override_calibration(None)
        perf.clear_caches()
    assert 5.0 < implied < 40.0
    assert PARAMS["request_overhead_ms"].prior <= implied, (PARAMS["request_overhead_ms"].prior, implied)
