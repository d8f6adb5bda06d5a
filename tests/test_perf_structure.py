"""Structural fixes of the performance model found from the calibration rows' residuals
(`python bench/residuals.py SOURCE`): a burst's first tokens wait for the API server to ingest the
whole burst; lockstep rounds break into groups when a round's prompts need more than one step; a
prompt chunk attends over the chunks before it; attention runs at its own efficiency and the 16-bit
peak; an expert GEMM sharded narrowly over tensor parallelism runs below the wide GEMMs' efficiency.
Each test fails on the model before the fix (main at 513900a)."""

from __future__ import annotations

import dataclasses

from sizing.catalog.calibration import PARAMS, calibration_from_dict, load_calibration
from sizing.catalog.lookup import load_catalog
from sizing.perf.load import WorkloadShape, estimate_burst, estimate_closed_loop
from sizing.perf.replica import ReplicaConfig
from sizing.perf.step import build_step_model, engine_step_s

CAT = load_catalog()
GPT_OSS = ReplicaConfig(model=CAT.model("gpt-oss-20b"), gpu="H100-SXM", precision="mxfp4", max_num_seqs=1024,
                        max_num_batched_tokens=8192)


def _cal(**values: float):  # type: ignore[no-untyped-def]
    return calibration_from_dict({"parameters": {**{n: p.prior for n, p in PARAMS.items()}, **values}})


def test_a_burst_streams_no_first_token_before_it_is_ingested() -> None:
    # GPUStack's 1,000-prompt bursts of 128 tokens: TTFT mean 5.6 s, p50 5.5 s, p99 5.8 s (gpsq235h,
    # perf_points_2026.csv): every request waits about the same, the API server's ingestion of all N
    n = 1000
    e = estimate_burst(CAT, GPT_OSS, WorkloadShape(128, 4), n)
    ingest_ms = n * load_calibration().v("frontend_ms_per_request")
    assert e.ttft_p50_ms >= ingest_ms
    assert e.ttft_p99_ms < 2.0 * e.ttft_p50_ms  # the spread is the engine's prefill, not the ingestion


def test_lockstep_rounds_break_up_when_a_round_needs_several_prefill_steps() -> None:
    # NIM, Llama-3.3-70B FP8 on 2 x H100, 25 users, 5,000-token prompts: measured TTFT 689 ms, about
    # one step of prefill beside the decodes; 25 prompts back to back (one lockstep round) take ~4 s
    cfg = ReplicaConfig(model=CAT.model("llama-3.3-70b-instruct"), gpu="H100-SXM", precision="fp8", tp=2,
                        engine="tensorrt-llm", kv_cache_dtype="fp8")
    shape = WorkloadShape(5000, 500)
    sync = estimate_closed_loop(CAT, cfg, shape, 25, synchronized=True)
    one = estimate_closed_loop(CAT, cfg, shape, 1)
    assert sync.ttft_ms < 3.0 * one.ttft_ms
    # a round that fits in one step still runs in lockstep: its TTFT is the whole round's prefill
    r16 = estimate_closed_loop(CAT, cfg, WorkloadShape(50, 128), 16, synchronized=True)
    assert r16.ttft_p50_ms == r16.ttft_p95_ms


def test_a_long_prompts_chunks_attend_over_the_chunks_before_them() -> None:
    # 32,000 tokens in 2,048-token chunks: chunk k attends over the k - 1 chunks before it, so the
    # attention work grows with the square of the prompt (before: each chunk over half of itself)
    cfg = ReplicaConfig(model=CAT.model("llama-3.1-8b-instruct"), gpu="H100-SXM", precision="bf16",
                        max_num_batched_tokens=2048)
    t16 = estimate_closed_loop(CAT, cfg, WorkloadShape(16000, 100), 1).ttft_ms
    t32 = estimate_closed_loop(CAT, cfg, WorkloadShape(32000, 100), 1).ttft_ms
    assert t32 > 2.3 * t16


def test_attention_runs_at_its_own_efficiency_and_the_16_bit_peak() -> None:
    m = CAT.model("llama-3.1-8b-instruct")

    def step(precision: str, **values: float) -> float:
        sm = build_step_model(CAT, _cal(**values), m, "H100-SXM", precision, 1, 1, "auto", "vllm", "nvlink")
        return engine_step_s(sm, [], [(2048, 30000)])  # a chunk deep into a long prompt: attention-bound

    assert step("bf16", attention_efficiency=0.35) > 1.5 * step("bf16", attention_efficiency=0.7)
    # FP8 weights speed up the GEMMs, not the 16-bit attention products
    assert step("fp8") > 0.8 * step("bf16")


def test_narrow_expert_shards_run_below_the_wide_gemms_efficiency() -> None:
    # Qwen3-235B's 1,536-wide experts over TP8 leave each GPU 192 columns; over TP4, 384
    m = CAT.model("qwen3-235b-a22b")
    cal = load_calibration()

    def expert_rate(tp: int) -> float:
        return build_step_model(CAT, cal, m, "H100-SXM", "bf16", tp, 1, "auto", "vllm", "nvlink").expert_flops_per_s

    def dense_rate(tp: int) -> float:
        return build_step_model(CAT, cal, m, "H100-SXM", "bf16", tp, 1, "auto", "vllm", "nvlink").dense_flops_per_s

    assert expert_rate(8) < 0.9 * expert_rate(4)
    assert dense_rate(8) == dense_rate(4)
    dense = CAT.model("llama-3.1-70b-instruct")
    assert build_step_model(CAT, cal, dense, "H100-SXM", "bf16", 8, 1, "auto", "vllm", "nvlink").expert_flops_per_s \
        == build_step_model(CAT, cal, dense, "H100-SXM", "bf16", 4, 1, "auto", "vllm", "nvlink").expert_flops_per_s


def test_a_burst_that_fits_in_one_batch_has_no_phantom_prefill_in_its_gaps() -> None:
    # 200 ShareGPT-like prompts into 1,024 slots: all are prefilled in the first steps, none is admitted
    # later, so the median gap is a decode-only step (before: the steady state's newcomers' chunks)
    cfg = ReplicaConfig(model=CAT.model("llama-3.1-8b-instruct"), gpu="H100-SXM", precision="bf16",
                        max_num_seqs=1024, max_num_batched_tokens=8192)
    e = estimate_burst(CAT, cfg, WorkloadShape(215, 194, 645, 582), 200)
    assert e.itl_p50_ms <= 1.001 * e.decode_step_ms


def test_a_bursts_mean_tpot_is_over_requests() -> None:
    # with long-tailed outputs a short request spends a larger share of its few gaps in the fill's
    # full-budget steps, so the mean over requests of their mean gap exceeds the pooled mean gap
    e = estimate_burst(CAT, GPT_OSS, WorkloadShape(215, 194, 645, 582), 1000)
    assert e.percentile("tpot", "mean") > e.percentile("itl", "mean")


def test_a_bursts_fill_steps_carry_the_decodes_of_the_prompts_already_prefilled() -> None:
    # vLLM V1's scheduler (vllm/v1/core/sched/scheduler.py, 0.11.0, schedule(): "First, schedule the
    # RUNNING requests" then "Next, schedule the WAITING requests" in what is left of token_budget):
    # while a 984-prompt burst is prefilled, every prompt already prefilled decodes one token per step,
    # so the fill's steps carry those decodes (their per-sequence CPU time, their KV reads) and leave
    # fewer tokens of the budget to the prompts. Before, the fill was the prompts alone.
    from sizing.perf.load import _ctx

    cfg = ReplicaConfig(model=CAT.model("llama-3.1-8b-instruct"), gpu="H100-SXM", precision="bf16",
                        max_num_seqs=1024, max_num_batched_tokens=8192)
    shape, n = WorkloadShape(215, 194), 984
    c = _ctx(CAT, cfg, shape)
    e = estimate_burst(CAT, cfg, shape, n)
    steps = n * 215 / 8192  # the fill's steps without decodes beside (~26)
    prompts_alone = c.sm.step_s(0.0, 0.0, n * 215, 107.5, n_steps=steps)
    # at least: the decodes' per-sequence CPU cost, ~n/2 running over the fill's steps
    decodes_cpu = (n / 2) * (1 - 1 / steps) * steps * c.sm.overhead_per_seq_s
    fill = e.ttft_p99_ms / 1e3 - n * c.frontend_s_per_request - c.request_overhead_s
    assert fill >= 0.98 * (prompts_alone + decodes_cpu)


def test_fp8_expert_gemms_of_the_triton_fused_moe_run_at_the_16_bit_rate() -> None:
    # vLLM and SGLang run FP8 W8A8 experts in the Triton fused-MoE kernel, which gains little over its
    # BF16 path: vllm-project/vllm PR #35457 (Qwen3MoE E=128 N=96, H200, TP8, both tuned) "FP8 vs BF16
    # (both tuned): 10-17% faster at batch sizes 4+", far from the 2x of the FP8 tensor peak.
    # GPUStack's Qwen3-235B rows (gpsq235h) agree: FP8 TP8 prefills its burst slower than BF16 TP8.
    m = CAT.model("qwen3-235b-a22b")
    cal = load_calibration()

    def rate(precision: str, engine: str) -> float:
        return build_step_model(CAT, cal, m, "H100-SXM", precision, 8, 1, "auto", engine, "nvlink").expert_flops_per_s

    assert rate("fp8", "vllm") == rate("bf16", "vllm")
    assert rate("fp8", "sglang") == rate("bf16", "sglang")
    assert rate("fp8", "tensorrt-llm") > 1.2 * rate("bf16", "tensorrt-llm")  # its own CUTLASS MoE GEMMs


def test_constants_held_at_their_priors_say_why_and_ignore_stale_values() -> None:
    import json

    from sizing.catalog.calibration import CALIBRATION_FILE, FITTED

    fixed = [n for n, p in PARAMS.items() if p.fixed]
    assert fixed and 12 <= len(FITTED) <= 20
    doc = json.loads(CALIBRATION_FILE.read_text())
    for n in fixed:
        assert doc["parameters"][n]["fixed"] and doc["parameters"][n]["value"] == PARAMS[n].prior, n
    stale = calibration_from_dict({"parameters": {n: PARAMS[n].hi for n in fixed}})
    assert all(stale.v(n) == PARAMS[n].prior for n in fixed)


def test_gpt_oss_dense_gemms_run_at_16_bits() -> None:
    """gpt-oss's attention projections, router and lm_head are 16-bit GEMMs (only the experts are
    MXFP4: vllm 0.10.2 quantization/mxfp4.py), so they run at the 16-bit rate, not the weight-only one,
    and their bytes are 2 per weight."""
    from sizing.perf.step import build_step_model
    cal = CAT.calibration
    m = CAT.model("gpt-oss-120b")
    sm = build_step_model(CAT, cal, m, "H100-SXM", "mxfp4", 1, 1, "auto", "vllm", "nvlink")
    bf16 = CAT.gpu("H100-SXM").bf16_dense_tflops * 1e12
    assert abs(sm.dense_flops_per_s / (bf16 * min(cal.v("gemm_mfu") * cal.engine_eff("vllm"), 1.0)) - 1) < 1e-9
    # non-expert weights read per step: attention + router (+ lm_head), ~0.96e9 + 1.16e9/2 params at 2 bytes
    assert 2.9e9 < sm.dense_bytes_per_gpu < 3.3e9


def test_sliding_window_layers_hold_their_window_in_the_kv_capacity() -> None:
    """vLLM >= 0.10's hybrid KV cache manager frees a sliding-window layer's blocks once they leave the
    window (vllm/v1/core/single_type_kv_cache_manager.py SlidingWindowManager.remove_skipped_blocks), so
    gpt-oss's 18 window-128 layers hold at most ~128 tokens of a 4,000-token sequence."""
    from sizing.perf.load import _build_ctx
    from sizing.perf.memory import GIB, kv_cache_bytes_per_sequence
    cfg = ReplicaConfig(model=CAT.model("gpt-oss-120b"), gpu="H100-SXM", precision="mxfp4", engine="vllm",
                        max_num_seqs=1024, max_num_batched_tokens=8192)
    shape = WorkloadShape(4000.0, 200.0)
    c = _build_ctx(CAT, cfg, shape)
    per_seq = kv_cache_bytes_per_sequence(cfg.model, 4100, 2.0)
    assert c.max_running_reason == "kv-capacity"
    assert c.max_running == int(c.fit.kv_cache_gib_available * GIB / per_seq)


def test_long_tailed_outputs_hold_more_kv_per_running_slot() -> None:
    """A KV-bound engine's running set is length-biased: each request holds its slot for its output
    length, so with log-normal outputs (p95 = 3 x mean, ShareGPT) a slot holds on average
    p + mean·exp(σ²)/2 tokens, not p + mean/2, and fewer sequences fit."""
    from sizing.perf.load import _build_ctx
    cfg = ReplicaConfig(model=CAT.model("gpt-oss-120b"), gpu="H100-SXM", precision="mxfp4", engine="vllm",
                        max_num_seqs=1024, max_num_batched_tokens=8192)
    fixed = _build_ctx(CAT, cfg, WorkloadShape(215.0, 194.0))
    tailed = _build_ctx(CAT, cfg, WorkloadShape(215.0, 194.0, None, 582.0))
    assert fixed.max_running_reason == tailed.max_running_reason == "kv-capacity"
    assert tailed.max_running < 0.85 * fixed.max_running


def test_a_lockstep_round_that_fits_one_step_leaves_no_prefill_in_the_decode_gaps() -> None:
    # dstack's DeepSeek-R1 on vLLM 0.7.4 (V0 without chunked prefill, a 163,840-token budget): 4-32 users of
    # 3,200 / 800 tokens finish together and the next round's prompts are prefilled in one step while nobody
    # decodes, so no token gap holds a prefill: ITL p99 26.5 / 32.2 / 50.8 / 53.5 ms against p50 25.7 / 31.3 /
    # 49.7 / 52.0 (dsr1h200-0175/0176 ...); the prefix-caching runs (--enable-chunked-prefill, staggered) show
    # 219-292 ms p99 gaps
    cfg = ReplicaConfig(model=CAT.model("deepseek-r1"), gpu="H200", precision="fp8", tp=8,
                        max_num_batched_tokens=163840, engine_version=(0, 7))
    e = estimate_closed_loop(CAT, cfg, WorkloadShape(3200, 800), 16, synchronized=True)
    assert e.itl_p99_ms <= 1.05 * e.decode_step_ms and e.tpot_p99_ms <= 1.05 * e.decode_step_ms
    assert abs(e.itl_ms - e.decode_step_ms) <= 0.05 * e.decode_step_ms
    # its TTFT is the round's prefill: 16 prompts of 3,200 tokens
    assert e.ttft_ms > 8 * estimate_closed_loop(CAT, cfg, WorkloadShape(3200, 800), 1).ttft_ms
    # staggered groups (a round over several steps) keep their prefill-carrying gaps
    s = estimate_closed_loop(CAT, ReplicaConfig(model=CAT.model("deepseek-r1"), gpu="H200", precision="fp8", tp=8,
                                                max_num_batched_tokens=2048, engine_version=(0, 7)),
                             WorkloadShape(3200, 800), 16, synchronized=True)
    assert s.itl_p99_ms > 1.5 * s.decode_step_ms


def test_a_prefill_priority_scheduler_keeps_lockstep_rounds_over_several_prefill_steps() -> None:
    # vLLM V0 without chunked prefill ("Don't schedule decodes if prefills are scheduled.", vllm 0.7.3
    # core/scheduler.py Scheduler._schedule_default) and SGLang 0.4 without --enable-mixed-chunk
    # (managers/scheduler.py get_next_batch_to_run: a new prefill batch, if any, runs alone) never decode
    # while prompts wait: a round of n prompts over k prefill steps ends with all n decoding together, so the
    # users still finish together and the next round again arrives at once. dstack's SGLang 0.4.3 rows: TTFT
    # mean 3.7 / 7.1 / 11.0 / 20.6 s at 8 / 16 / 32 / 64 users of 3,200 tokens (grows with the round, p99
    # about twice the mean at 64), ITL p99 within 15 % of p50 up to 64 users
    base = ReplicaConfig(model=CAT.model("deepseek-r1"), gpu="H200", precision="fp8", tp=8, engine="sglang",
                         max_num_batched_tokens=8192, engine_version=(0, 4))
    prio = dataclasses.replace(base, prefill_only_steps=True)
    shape = WorkloadShape(3200, 800)
    t = [estimate_closed_loop(CAT, prio, shape, n, synchronized=True) for n in (8, 16, 32, 64)]
    assert all(b.ttft_ms > 1.6 * a.ttft_ms for a, b in zip(t, t[1:], strict=False))  # the whole round's prefill
    assert t[-1].ttft_p99_ms > 1.5 * t[-1].ttft_p50_ms > t[-1].ttft_p50_ms  # the last prompts of the round
    assert t[-1].itl_p99_ms <= 1.05 * t[-1].decode_step_ms  # one long gap per request, below the p99
    # a scheduler that mixes decodes into the prefill steps staggers the round into groups (NIM's rows)
    mixed = estimate_closed_loop(CAT, base, shape, 64, synchronized=True)
    assert mixed.ttft_ms < 0.3 * t[-1].ttft_ms
    # E2E and throughput of the round: all n finish together
    assert abs(t[-1].e2e_latency_ms - (t[-1].ttft_ms + 799 * t[-1].itl_ms)) < 0.01 * t[-1].e2e_latency_ms


def test_sglang_decodes_eagerly_above_its_cuda_graph_max_batch() -> None:
    # SGLang 0.5.4.post2 srt/server_args.py _handle_gpu_memory_settings: H100 / H200 (60-160 GiB) capture
    # decode graphs up to cuda_graph_max_bs 256 below TP4 and 512 from TP4; A100-40GB 32 / 160; and
    # model_executor/cuda_graph_runner.py can_run: 'cuda_graph_bs <= self.max_bs', else the batch runs
    # eagerly. A 1,000-sequence decode step then pays the kernel launches --disable-cuda-graph pays.
    assert CAT.cuda_graph_max_batch("sglang", (0, 5), 80.0, 1) == 256
    assert CAT.cuda_graph_max_batch("sglang", (0, 5), 141.0, 8) == 512
    assert CAT.cuda_graph_max_batch("sglang", None, 40.0, 1) == 32
    assert CAT.cuda_graph_max_batch("sglang", (0, 4), 80.0, 1) == float("inf")  # 0.4 not read here
    assert CAT.cuda_graph_max_batch("vllm", (0, 11), 80.0, 1) == float("inf")
    cal = load_calibration()
    m = CAT.model("llama-3.1-8b-instruct")
    sm = build_step_model(CAT, cal, m, "H100-SXM", "bf16", 1, 1, "auto", "sglang", "nvlink", graph_max_batch=256)
    plain = build_step_model(CAT, cal, m, "H100-SXM", "bf16", 1, 1, "auto", "sglang", "nvlink")
    eager = build_step_model(CAT, cal, m, "H100-SXM", "bf16", 1, 1, "auto", "sglang", "nvlink", cuda_graphs=False)
    launches = cal.v("eager_launch_us_per_layer") * m.num_layers / 1e6
    assert sm.gpu_s(256, 500.0) == plain.gpu_s(256, 500.0)  # inside the graph
    assert abs(sm.gpu_s(1000, 500.0) - plain.gpu_s(1000, 500.0) - launches) < 1e-9
    assert abs(sm.gpu_s(1000, 500.0) - eager.gpu_s(1000, 500.0)) < 1e-9
    assert sm.gpu_s(0, 0.0, 8192, 100.0) == plain.gpu_s(0, 0.0, 8192, 100.0)  # prefill steps: not charged
    # a calibration row's SGLang replica on H100 at TP1 reads its bound from the table
    from sizing.perf.load import _ctx
    cfg = ReplicaConfig(model=m, gpu="H100-SXM", precision="bf16", engine="sglang", engine_version=(0, 5))
    assert _ctx(CAT, cfg, WorkloadShape(200, 200)).sm.graph_max_batch == 256
