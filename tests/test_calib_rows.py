"""How calibration rows map onto serving configs (bench/calib_rows.py): engine behaviour that a
benchmark's engine version implies."""

from __future__ import annotations

import csv
from pathlib import Path

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


def test_r2rz_short_prompts_repeat_so_all_but_the_engines_recompute_tail_is_a_prefix_hit() -> None:
    # ree2raz/inference-bench prompts/workload.jsonl holds 100 short prompts of which 49 are distinct, its
    # warm-up sends the first 2c of the same prompts, and one server runs every concurrency in turn
    # (modal_v2_*.py run_all): a repeated prompt is a full prefix hit less what the engine recomputes -
    # vLLM whole 16-token blocks below the prompt's last token, SGLang all but the last token
    rows = [r for r in load_rows(load_catalog()) if r.source == "r2rz"]
    short = [r for r in rows if r.shape.prompt_tokens == 50]
    assert short and "r2rz_short_repeats" in BENCHMARK_ASSUMPTIONS
    assert {r.shape.prefix_cache_hit_rate for r in short if r.cfg.engine == "vllm"} == {48 / 50}
    assert {r.shape.prefix_cache_hit_rate for r in short if r.cfg.engine == "sglang"} == {49 / 50}
    assert {r.shape.prefix_cache_hit_rate for r in rows if r.shape.prompt_tokens > 1000
            and not (r.load == 1 and r.metric == "ttft_ms")} == {0.95}


def test_r2rz_long_first_pass_p95_ttft_is_a_prompt_computed_in_full() -> None:
    # ree2raz/inference-bench: the long regime's 100 prompts repeat 10 distinct ones, first seen at ranks
    # 0, 1, 2, 4, 5, 6, 7, 8, 20, 30 (prompts/workload.jsonl); its first run (c = 1, run_all's first long
    # concurrency) warms up with prompts[:2] and then measures all 100, so 8 of the 100 measured prompts
    # are computed in full: the 8 slowest (raw/vllm_long_c1_r1.jsonl: 399-435 ms beside 72-78 ms), so the
    # run's p95 (bench_lib.pct: linear between sorted ranks 94 and 95) is one of them and its p50 is not
    from bench.calib_rows import _first_pass_misses
    rows = [r for r in load_rows(load_catalog()) if r.source == "r2rz" and r.shape.prompt_tokens > 1000
            and r.metric == "ttft_ms"]
    first = {(r.cfg.engine, r.cfg.precision, r.stat): r.shape.prefix_cache_hit_rate for r in rows if r.load == 1}
    assert first and {v for (_, _, stat), v in first.items() if stat == "p95"} == {0.0}
    # its p50 is a repeat of a prompt it has computed: the engines' prefix-hit rule, as the short regime's
    assert {v for (eng, _, stat), v in first.items() if stat == "p50" and eng == "vllm"} == {1648 / 1650}
    assert {v for (eng, _, stat), v in first.items() if stat == "p50" and eng == "sglang"} == {1649 / 1650}
    assert {r.shape.prefix_cache_hit_rate for r in rows if r.load > 1} == {0.95}
    assert _first_pass_misses(1) == 8 and _first_pass_misses(16) == 0


def test_trt013_engines_take_trtllm_bench_builds_dataset_limits() -> None:
    """TensorRT-LLM 0.13's perf-overview builds each engine with `trtllm-bench build --dataset`, whose
    heuristic (tensorrt_llm/bench/build/tuning.py finetune_setting) sizes max_batch_size from the KV
    requests of ISL + OSL and max_num_tokens as max_batch_size x (1 + ISL / OSL), rounded up (min 2048).
    Llama-3.1-8B FP8 on one H100, 128 / 4096: 2 x 32 layers x 8 heads x 128 x 1 byte a token; (80 GiB -
    8.03 GB) x 0.95 / 4,224 tokens = 265 requests -> 384 (rounded up to 128); 265 x 1.03 tokens -> 2048."""
    from bench.calib_rows import load_rows
    cat = load_catalog()
    rows = [r for r in load_rows(cat) if r.source == "trt013" and r.cfg.model.short_name == "llama-3.1-8b-instruct"
            and r.cfg.gpu == "H100-SXM" and r.cfg.precision == "fp8"]
    by_shape = {(r.shape.prompt_tokens, r.shape.output_tokens): (r.cfg.max_num_seqs, r.cfg.max_num_batched_tokens)
                for r in rows}
    assert by_shape[(128.0, 4096.0)] == (384, 2048)
    assert by_shape[(128.0, 128.0)] == (4096, 8192)  # capped at 4,096 sequences; 4,096 x 2 tokens
    assert by_shape[(2048.0, 128.0)][1] > 8192  # a prefill-heavy dataset gets a larger token budget


def test_vllm_v0_with_mla_prefills_whole_prompts_in_a_max_model_len_budget_unless_chunked_prefill_is_asked() -> None:
    # vLLM V0 (before 0.8 by default) does not chunk MLA prefills unless asked (vllm 0.8.0
    # engine/arg_utils.py _set_default_args_v0: "Chunked prefill not supported for Multimodal or MLA in V0.
    # ... self.enable_chunked_prefill = False"), and a scheduler without chunked prefill batches up to
    # max(max_model_len, 2048) prompt tokens per step (config.py SchedulerConfig.__post_init__); with
    # --enable-chunked-prefill its budget is 2048 ("chosen to have a balance between ITL and TTFT").
    # dstack's DeepSeek-R1 rows on the 0.7.4 nightly: the random-dataset runs do not chunk (a round of up to
    # 51 prompts of 3,200 tokens in one step: their TTFT grows with the users, mean = p50 = p99), the
    # prefix-caching runs pass --enable-chunked-prefill
    rows = [r for r in load_rows(load_catalog()) if r.source == "dsr1h200" and r.cfg.engine == "vllm"]
    notes = _notes()
    plain = [r for r in rows if "--enable-chunked-prefill" not in notes[r.id]]
    chunked = [r for r in rows if "--enable-chunked-prefill" in notes[r.id]]
    assert plain and chunked
    assert {r.cfg.max_num_batched_tokens for r in plain} == {163840}  # DeepSeek-R1's max_position_embeddings
    assert {r.cfg.max_num_batched_tokens for r in chunked} == {2048}
    # V1 (0.8 and later) and non-MLA V0 rows are not this rule's
    v1 = [r for r in load_rows(load_catalog()) if r.cfg.engine == "vllm" and r.source == "gpsdsr1"]
    assert v1 and all(r.cfg.max_num_batched_tokens != 163840 for r in v1)
    assert "vllm_v0_prefill_budget" in BENCHMARK_ASSUMPTIONS


def test_trtllm_serve_limits_are_read_from_its_command() -> None:
    # trtllm-serve's --max_num_tokens (tokens per step) and --max_batch_size (sequences) are its
    # max_num_batched_tokens and max_num_seqs: dstack's 0.17 runs pass 16384 and 512
    rows = [r for r in load_rows(load_catalog()) if r.source == "dsr1h200" and r.cfg.engine == "tensorrt-llm"]
    assert rows and {(r.cfg.max_num_batched_tokens, r.cfg.max_num_seqs) for r in rows} == {(16384, 512)}


def _notes() -> dict[str, str]:
    """Row id -> the source's conditions (the third calibration file's notes)."""
    path = Path(__file__).parents[1] / "bench/calibration/perf_points_2026_ext.csv"
    with path.open(newline="", encoding="utf-8") as f:
        return {r["id"]: r["notes"] for r in csv.DictReader(f)}


def test_engine_settings_listed_without_dashes_are_read() -> None:
    # dstack's Llama-3.1-405B runs list the vLLM 0.6.3 server's settings from its README's environment table
    # ("chunked prefill=TRUE, max-num-batched-tokens=512, max-num-seqs=512, ..."), not as a command line
    rows = [r for r in load_rows(load_catalog()) if r.source == "dsh100"]
    assert rows and {(r.cfg.max_num_batched_tokens, r.cfg.max_num_seqs) for r in rows} == {(512, 512)}


def test_prefill_priority_engines_are_marked_from_their_version_and_flags() -> None:
    # vLLM V0 without chunked prefill and SGLang 0.4 without --enable-mixed-chunk decode only when no prompt
    # waits (sizing/data/engine_prefill_budget.csv); V1 vLLM, SGLang 0.5 and TensorRT-LLM rows are not marked
    rows = load_rows(load_catalog())
    notes = _notes()
    ds = [r for r in rows if r.source == "dsr1h200"]
    assert all(r.cfg.prefill_only_steps for r in ds if r.cfg.engine == "sglang")
    assert all(r.cfg.prefill_only_steps == ("--enable-chunked-prefill" not in notes[r.id])
               for r in ds if r.cfg.engine == "vllm")
    assert not any(r.cfg.prefill_only_steps for r in ds if r.cfg.engine == "tensorrt-llm")
    assert not any(r.cfg.prefill_only_steps for r in rows if r.source.startswith("gps"))
    assert "prefill_only_steps" in BENCHMARK_ASSUMPTIONS


def test_blocks_a_page_reprints_from_another_page_are_left_out_and_counted() -> None:
    # GPUStack's GLM-4.5-Air H100 page (docs/performance-lab/glm-4.5-air/h100.md) prints under "Other
    # Benchmark Cases" the A100 page's tables digit for digit (vLLM's "random 32K input" block: "Total Token
    # throughput (tok/s): 6435.97", "Mean TTFT (ms): 248013.29" on both pages), while its own conclusion gives
    # the same vLLM baseline on H100 as "Very Long Prompt | Total TPS: 20732.85" (the A100 page's: 6435.97).
    # Those rows measure an A100 run the A100 page already holds: not the H100 configuration they claim.
    calib = Path(__file__).resolve().parents[1] / "bench" / "calibration"
    raw: list[dict[str, str]] = []
    for p in sorted(calib.glob("perf_points*.csv")):
        with open(p, encoding="utf-8", newline="") as f:
            raw += list(csv.DictReader(f))

    def block(page: str) -> dict[tuple[str, ...], str]:
        return {(r["engine"], r["isl"], r["osl"], r["metric"], r["stat"]): r["value"] for r in raw
                if r["id"].startswith(page + "-") and r["notes"].startswith("Other Benchmark Cases")}

    h100, a100 = block("gpsglmairh"), block("gpsglmaira")
    assert len(h100) == 96 and h100 == a100  # the claim the exclusion rests on
    skipped: dict[str, int] = {}
    rows = load_rows(load_catalog(), skipped=skipped)
    ids = {r.id for r in rows}
    reprinted = [r["id"] for r in raw if r["id"].startswith("gpsglmairh-")
                 and r["notes"].startswith("Other Benchmark Cases")]
    assert reprinted and not ids & set(reprinted)
    assert any(k.startswith("reprinted") and v == 96 for k, v in skipped.items())
    # the page's own runs stay (its engine choice, quantization and parallelism blocks)
    assert any(i.startswith("gpsglmairh-") for i in ids)
    assert {r["id"] for r in raw if r["id"].startswith("gpsglmaira-")
            and r["notes"].startswith("Other Benchmark Cases")} <= ids  # the A100 page keeps its own
    assert "reprinted_blocks" in BENCHMARK_ASSUMPTIONS
