"""How calibration rows map onto serving configs (bench/calib_rows.py): engine behaviour that a
benchmark's engine version implies."""

from __future__ import annotations

from bench.calib_rows import BENCHMARK_ASSUMPTIONS, load_rows
from sizing.catalog.lookup import load_catalog


def test_tgi_before_cuda_graphs_runs_eagerly() -> None:
    # TGI added CUDA graphs in 2024 (huggingface/text-generation-inference PR #1428 "experimental support
    # for cuda graphs", on by default from PR #1703, 2024-04-04); the SageMaker blog's TGI 1.0.3 (hfsm)
    # launches every kernel from Python
    rows = [r for r in load_rows(load_catalog()) if r.cfg.engine == "tgi"]
    assert rows and all(not r.cfg.cuda_graphs for r in rows)
    assert "tgi_eager" in BENCHMARK_ASSUMPTIONS
