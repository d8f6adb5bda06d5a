"""Kernel paths and CPU costs the engines' own code sets (round 4 of the performance model, 2026-12-01):
TensorRT-LLM's C++ batch manager does not pay a Python scheduler's per-sequence cost; `--quantization awq`
dequantizes the weights and runs a dense matmul (vLLM from 256 tokens a step, SGLang always); the
lm_head multiplies only the positions that sample. Each test fails on the model before the change
(main at 89c8c82)."""

from __future__ import annotations

from sizing.catalog.calibration import load_calibration
from sizing.catalog.lookup import load_catalog
from sizing.perf.memory import embedding_params
from sizing.perf.step import AWQ_DEQUANTIZE_BYTES_PER_PARAM, build_step_model

CAT = load_catalog()
CAL = load_calibration()


def _sm(model: str, gpu: str, precision: str, engine: str = "vllm", awq_marlin: bool = True,
        cuda_graphs: bool = True):  # type: ignore[no-untyped-def]
    link = "nvlink" if CAT.gpu(gpu).nvlink_bandwidth_gbs else "pcie"
    return build_step_model(CAT, CAL, CAT.model(model), gpu, precision, 1, 1, "auto", engine, link,
                            cuda_graphs=cuda_graphs, awq_marlin=awq_marlin)


def test_tensorrt_llm_schedules_its_batch_in_cpp_not_at_a_python_engines_cost_per_sequence() -> None:
    # trtllm-bench's offline runs batch up to 4,096 sequences (trt013: Llama-3.1-8B FP8 on H200, 128/128,
    # 28,126 output tok/s measured). At vLLM's fitted per-sequence cost (~54 µs) the CPU alone took
    # 220 ms a step, twice the GPU's work, and the prediction was 12,064 tok/s.
    # (fitted 2026-12-03 by publisher group: vLLM's per-sequence cost 19 µs, TensorRT-LLM's held at 2 µs)
    assert CAL.overhead_per_seq_s("tensorrt-llm") * 5 < CAL.overhead_per_seq_s("vllm")
    sm = _sm("llama-3.1-8b-instruct", "H200", "fp8", engine="tensorrt-llm")
    step = sm.step_s(4096, 192, 4096, 64)
    assert step - sm.gpu_s(4096, 192, 4096, 64) < 0.1 * step  # was 0.63 of the step


def test_unfused_awq_dequantizes_to_16_bits_from_256_tokens_in_vllm() -> None:
    # vllm/model_executor/layers/quantization/awq.py AWQLinearMethod.apply: below 256 tokens the fused
    # awq_gemm reads the 4-bit weights; from 256 it writes and reads back a 16-bit copy of every weight
    fused = _sm("qwen2.5-7b-instruct", "L4", "int4-awq")
    unfused = _sm("qwen2.5-7b-instruct", "L4", "int4-awq", awq_marlin=False)
    assert CAT.engine("vllm").awq_unfused_dequantize_min_tokens == 256
    assert unfused.step_s(8, 600) == fused.step_s(8, 600)
    mem_f, _, _ = fused.parts(0, 0, 512, 256)
    mem_u, _, _ = unfused.parts(0, 0, 512, 256)
    m = CAT.model("qwen2.5-7b-instruct")
    quantized = m.params_total_b * 1e9 - embedding_params(m)
    assert abs((mem_u - mem_f) * unfused.bw_bytes_per_s - quantized * AWQ_DEQUANTIZE_BYTES_PER_PARAM) \
        < 1e-6 * quantized
    assert unfused.step_s(0, 0, 512, 256) > fused.step_s(0, 0, 512, 256)


def test_sglang_unfused_awq_dequantizes_in_every_step() -> None:
    # sglang/srt/layers/quantization/awq.py AWQLinearMethod.apply: `out = awq_dequantize(qweight, scales,
    # qzeros); out = torch.matmul(reshaped_x, out)` whatever the batch. r2rz: SGLang 0.4.6 with
    # `--quantization awq --disable-cuda-graph` decodes Qwen2.5-7B-AWQ on one L4 at ~120 ms per token,
    # where the 4-bit weights alone take ~25 ms to read
    fused = _sm("qwen2.5-7b-instruct", "L4", "int4-awq", engine="sglang", cuda_graphs=False)
    unfused = _sm("qwen2.5-7b-instruct", "L4", "int4-awq", engine="sglang", awq_marlin=False, cuda_graphs=False)
    assert CAT.engine("sglang").awq_unfused_dequantize_min_tokens == 0
    assert unfused.step_s(1, 100) > 3.0 * fused.step_s(1, 100)
    assert 0.09 < unfused.step_s(1, 100) < 0.16


def test_only_the_sampled_positions_multiply_the_lm_head() -> None:
    # vLLM V1 gpu_model_runner: `sample_hidden_states = hidden_states[logits_indices]`, then compute_logits
    # on those rows only: a prompt token runs every GEMM but the lm_head; a decode token runs it too
    sm = _sm("llama-3.1-8b-instruct", "H100-SXM", "bf16")
    m = CAT.model("llama-3.1-8b-instruct")
    _, decode, _ = sm.parts(512, 0)
    _, prefill, _ = sm.parts(0, 0, 512, 0)
    lm_head = 2.0 * m.vocab_size * m.hidden_size * 512 / sm.dense_flops_per_s
    assert abs((decode - prefill) - lm_head) < 1e-9 * decode + 1e-12
    assert prefill < decode


def test_early_vllm_deepseek_decode_pays_for_its_kernel_count() -> None:
    # dstack's DeepSeek-R1 on 8xH200 with the vLLM 0.7.4 nightly (FlashMLA) decodes 4 users at 25.7 ms a token
    # (dsr1h200 TPOT); the weights, all-reduces and CPU alone give ~12 ms. vLLM 0.7.x runs ~65 kernels per
    # layer there (torch grouped_topk and rotary, 2-kernel block-FP8 linears; engine_kernels.csv counts them in
    # its code), SGLang 0.4.3 with DP attention ~89
    from sizing.perf.load import WorkloadShape, estimate_closed_loop
    from sizing.perf.replica import ReplicaConfig

    ds = CAT.model("deepseek-r1")
    assert CAT.engine_kernels_per_layer("vllm", (0, 7), ds) == 65
    assert CAT.engine_kernels_per_layer("sglang", (0, 4), ds) == 89
    assert CAT.engine_kernels_per_layer("sglang", (0, 5), ds) == 0
    assert CAT.engine_kernels_per_layer("vllm", (0, 11), ds) == 0  # V1's fused routing and MLA: not a term
    assert CAT.engine_kernels_per_layer("vllm", None, ds) == 0  # llmcap's own pinned engine
    assert CAT.engine_kernels_per_layer("vllm", (0, 7), CAT.model("llama-3.1-8b-instruct")) == 0
    old = ReplicaConfig(ds, "H200", "fp8", tp=8, engine="vllm", engine_version=(0, 7))
    new = ReplicaConfig(ds, "H200", "fp8", tp=8, engine="vllm", engine_version=(0, 11))
    shape = WorkloadShape(3200, 800)
    tpot_old = estimate_closed_loop(CAT, old, shape, 4, synchronized=True).itl_ms
    tpot_new = estimate_closed_loop(CAT, new, shape, 4, synchronized=True).itl_ms
    floor_ms = 65 * ds.num_layers * CAL.v("graph_kernel_us") / 1000
    assert abs(tpot_old - tpot_new - floor_ms) < 0.05 * floor_ms
    assert tpot_old > 1.5 * tpot_new  # was equal: no kernel term


def test_shared_constants_stay_within_the_kernel_and_library_tables() -> None:
    # held-out fits used to push these to their old bounds to slow dstack's DeepSeek rows down (2,048 columns:
    # Qwen3-235B's 192-column TP8 shard at 0.09 of the wide rate; 11.9 µs a hop); the engines' own tables cap them
    from sizing.catalog.calibration import PARAMS, Calibration

    assert PARAMS["expert_shard_width_half"].hi <= 256  # vLLM fused-MoE configs: BLOCK_SIZE_N at most 256
    assert PARAMS["nvlink_hop_latency_us"].hi <= 5.0  # NCCL tuning.cc hwLat, NVLink ring: 3.4 µs Simple
    worst = Calibration(values={**CAL.values, "expert_shard_width_half": PARAMS["expert_shard_width_half"].hi})
    wide = Calibration(values={**CAL.values, "expert_shard_width_half": 1e-9})
    q = CAT.model("qwen3-235b-a22b")
    rate = build_step_model(CAT, worst, q, "H100-SXM", "bf16", 8, 1, "auto", "vllm", "nvlink").expert_flops_per_s
    full = build_step_model(CAT, wide, q, "H100-SXM", "bf16", 8, 1, "auto", "vllm", "nvlink").expert_flops_per_s
    assert rate >= 0.4 * full  # 192 / (192 + 256) = 0.43
