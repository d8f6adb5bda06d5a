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


def test_tensorrt_llm_pytorch_backend_before_1_0_runs_eagerly_without_a_cuda_graph_config() -> None:
    # TensorRT-LLM's early PyTorch backend captured CUDA graphs only when asked
    # (tensorrt_llm/_torch/pyexecutor/config.py PyTorchConfig: `use_cuda_graph: bool = False`); dstack's
    # DeepSeek-R1 runs on 0.17 (`trtllm-serve --backend pytorch ...`) pass no extra_llm_api_options
    rows = [r for r in load_rows(load_catalog()) if r.cfg.engine == "tensorrt-llm"]
    dstack = [r for r in rows if r.source == "dsr1h200"]
    assert dstack and all(not r.cfg.cuda_graphs for r in dstack)
    assert all(r.cfg.cuda_graphs for r in rows if r.source != "dsr1h200")  # the 1.x and C++-runtime rows
    assert "trtllm_pytorch_eager" in BENCHMARK_ASSUMPTIONS


def test_awq_rows_served_with_quantization_awq_run_the_unfused_kernels() -> None:
    # r2rz's L4 runs pass `--quantization awq` (vLLM 0.8.5 and SGLang 0.4.6); its A100 runs pass
    # `--quantization awq_marlin`; gpustackq's page has a row 'AWQ' beside a row 'AWQ Marlin'
    rows = load_rows(load_catalog())
    r2rz = [r for r in rows if r.source == "r2rz" and r.cfg.precision == "int4-awq"]
    assert {r.cfg.gpu for r in r2rz if not r.cfg.awq_marlin} == {"L4"}
    assert all(r.cfg.awq_marlin for r in r2rz if r.cfg.gpu != "L4")
    gq = {r.id: r.cfg.awq_marlin for r in rows if r.source == "gpustackq" and r.cfg.precision == "int4-awq"}
    assert gq["gpustackq-0010"] is False and gq["gpustackq-0013"] is True
    assert all(r.cfg.awq_marlin for r in rows if r.cfg.precision != "int4-awq")
    assert "awq_unfused_rows" in BENCHMARK_ASSUMPTIONS
