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


def _by_id(prefix: str) -> dict[str, object]:
    return {r.id: r for r in load_rows(load_catalog()) if r.id.startswith(prefix)}


def test_guidellm_constant_rate_rows_are_an_open_loop_at_their_rate_not_a_closed_loop_at_peak() -> None:
    # GPUStack's benchmark worker runs `benchmark-runner benchmark run --profile constant --rate
    # <request_rate> --max-requests <total>` (gpustack/worker/benchmark/runner.py _build_command_args);
    # guidellm's constant profile sends at uniform intervals (AsyncConstantStrategy "Requests arrive at
    # uniform intervals"); the pages' "peak concurrent requests" is what the server held, an outcome
    rows = _by_id("gpsq35")
    for rid, rate in (("gpsq359bl-0111", 1.0), ("gpsq359bl-0133", 4.0), ("gpsq359bl-0001", 8.0),
                      ("gpsq35moel-0177", 16.0), ("gpsq359b-0187", 1.0), ("gpsq359b-0205", 1.0)):
        r = rows[rid]
        assert (r.mode, r.load, r.arrivals) == ("open", rate, "uniform"), rid  # type: ignore[attr-defined]
    assert "guidellm_constant_rate" in BENCHMARK_ASSUMPTIONS


def test_guidellm_unlimited_rate_rows_are_a_burst_of_the_requests_held_in_flight() -> None:
    # GPUStack's profiles (gpustack/assets/profiles_config/profiles_config.yaml): Throughput 1024/128 sends
    # 1,000 requests at an unlimited rate (guidellm holds 512 in flight: 'peak concurrent requests=512');
    # the 35B page ran Long Context (32000/100, 100 requests) and Generation Heavy (1000/2000, 200) at an
    # unlimited rate too ('request_rate' inf, peak 100 and 200: every request in flight at once)
    rows = _by_id("gpsq35")
    for rid, n in (("gpsq359b-0169", 512.0), ("gpsq35moe-0100", 512.0), ("gpsq35moe-0122", 100.0),
                   ("gpsq35moe-0144", 200.0), ("gpsq359b-0001", 512.0)):
        r = rows[rid]
        assert (r.mode, r.load) == ("burst", n), rid  # type: ignore[attr-defined]


def test_vllm_bench_serve_with_fewer_prompts_than_max_concurrency_is_a_burst_of_the_prompts() -> None:
    # Vultr's cookbook runs `vllm bench serve` with 400 prompts (50 at concurrency 1) at an infinite rate
    # under --max-concurrency c: at c >= 400 all 400 are sent at once (vllm/benchmarks/serve.py limits
    # in-flight requests with asyncio.Semaphore(max_concurrency)); below, the first c at once and each other
    # prompt when one finishes (a capped burst: sizing.perf.capped_burst)
    rows = _by_id("vultrb200")
    assert [(rows[i].mode, rows[i].load) for i in ("vultrb200-0025", "vultrb200-0029", "vultrb200-0033")] == [  # type: ignore[attr-defined]
        ("burst", 256.0), ("burst", 400.0), ("burst", 400.0)]
    assert [rows[i].requests for i in ("vultrb200-0025", "vultrb200-0029", "vultrb200-0001")] == [400, 0, 50]  # type: ignore[attr-defined]


def test_guidellm_bursts_of_more_requests_than_its_cap_carry_their_total() -> None:
    # the 1,000-request ShareGPT runs and the Throughput profile (1,000 requests) go out 512 at a time;
    # the speculative-decoding block of the 9B page sent 514 ('514 reqs' in its block totals)
    rows = _by_id("gpsq35")
    for rid, n in (("gpsq359b-0001", 1000), ("gpsq359b-0169", 1000), ("gpsq359b-0028", 514),
                   ("gpsq35moe-0122", 0)):
        assert rows[rid].requests == n, rid  # type: ignore[attr-defined]


def test_sglang_rows_without_max_running_requests_run_sglangs_own_limit() -> None:
    # BENCHMARK_ASSUMPTIONS["sglang_defaults"]: sglang 0.5.4.post2 tp_worker.py max_running_requests =
    # min(max_total_num_tokens // 2, req_to_token_pool.size), the pool at least 2,048 (model_runner.py);
    # before, SGLang rows took engines.csv's planner default of 256 and a 1,000-prompt burst waited on slots
    r = _by_id("gpsglmairh-0016")["gpsglmairh-0016"]
    assert (r.cfg.engine, r.cfg.max_num_seqs) == ("sglang", 2048)  # type: ignore[attr-defined]
    assert "sglang_defaults" in BENCHMARK_ASSUMPTIONS
