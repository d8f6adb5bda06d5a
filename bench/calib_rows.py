"""How each published measurement in bench/calibration/perf_points.csv, perf_points_2026.csv and
perf_points_2026_ext.csv (the in-repo copy of the project's calibration data,
bench/calibration/VENDORED.md) maps onto the model (all three files together by default).

Shared by bench/calibrate.py and bench/accuracy.py. Every interpretation of a source that the
CSV does not state is an ASSUMPTION listed in BENCHMARK_ASSUMPTIONS, which calibrate.py copies
into sizing/data/perf_calibration.json so the fit says what it assumed.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sizing.catalog.lookup import Catalog
from sizing.catalog.records import ModelArch
from sizing.perf.capped_burst import estimate_capped_burst
from sizing.perf.load import (
    LoadEstimate,
    WorkloadShape,
    estimate_burst,
    estimate_closed_loop,
    estimate_offline,
    estimate_open_loop,
)
from sizing.perf.replica import ReplicaConfig
from sizing.perf.spec_decode import SpecDecode, acceptance_length

CALIB_DIR = Path(__file__).resolve().parent / "calibration"  # bench/calibration/VENDORED.md
DEFAULT_CSV = CALIB_DIR / "perf_points.csv"
DEFAULT_CSVS = tuple(CALIB_DIR / f for f in ("perf_points.csv", "perf_points_2026.csv", "perf_points_2026_ext.csv"))
GLM_AIR = str(CALIB_DIR / "configs" / "GLM-4.5-Air" / "config.json")  # read by the glm4_moe reader
GLM_46 = str(CALIB_DIR / "configs" / "GLM-4.6" / "config.json")
# hybrid linear-attention models, read by sizing/catalog/architectures/hybrid.py (sources in hybrid_configs/SOURCES.md)
QWEN35_9B = str(CALIB_DIR.parent / "hybrid_configs" / "Qwen3.5-9B" / "config.json")
QWEN35_35B = str(CALIB_DIR.parent / "hybrid_configs" / "Qwen3.5-35B-A3B" / "config.json")
NEMOTRON_NANO = str(CALIB_DIR.parent / "hybrid_configs" / "NVIDIA-Nemotron-3-Nano-30B-A3B" / "config.json")

MODELS = {
    "Llama-2-7B": "llama-2-7b", "Llama-2-13B": "llama-2-13b", "Llama-2-70B": "llama-2-70b",
    "Llama-3.1-8B": "llama-3.1-8b-instruct", "Llama-3.1-70B": "llama-3.1-70b-instruct",
    "Llama-3.1-405B": "llama-3.1-405b-instruct", "Llama-3.3-70B": "llama-3.3-70b-instruct",
    "Mistral-7B": "mistral-7b-instruct-v0.3", "Mixtral-8x7B": "mixtral-8x7b-instruct", "Qwen3-8B": "qwen3-8b",
    "openai/gpt-oss-120b": "gpt-oss-120b", "openai/gpt-oss-20b": "gpt-oss-20b",
    "Qwen/Qwen3-235B-A22B-Instruct-2507": "qwen3-235b-a22b",
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": "qwen3-235b-a22b",
    "Qwen/Qwen2.5-7B-Instruct": "qwen2.5-7b-instruct", "Qwen/Qwen2.5-7B-Instruct-AWQ": "qwen2.5-7b-instruct",
    "Qwen/Qwen3-30B-A3B": "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B (AWQ checkpoint)": "qwen3-30b-a3b",
    # perf_points_2026_ext.csv
    "deepseek-ai/DeepSeek-R1": "deepseek-r1", "deepseek-ai/DeepSeek-R1-0528": "deepseek-r1",
    "/workspace/DeepSeek-R1-0528": "deepseek-r1", "meta-llama/Llama-3.1-405B-FP8": "llama-3.1-405b-instruct",
    "zai-org/GLM-4.5-Air": GLM_AIR, "GLM-4.5-Air": GLM_AIR, "zai-org/GLM-4.5-Air-FP8": GLM_AIR,
    "zai-org/GLM-4.6": GLM_46, "zai-org/GLM-4.6-FP8": GLM_46,
    # BENCHMARK_ASSUMPTIONS["deepseek_v32"]
    "deepseek-ai/DeepSeek-V3.2": "deepseek-v3.2", "/workspace/DeepSeek-v3.2": "deepseek-v3.2",
}
MODELS.update({
    "Qwen/Qwen3.5-9B": QWEN35_9B, "Qwen/Qwen3.5-35B-A3B": QWEN35_35B, "Qwen/Qwen3.5-35B-A3B-FP8": QWEN35_35B,
    # BENCHMARK_ASSUMPTIONS["nemotron_nano"]
    "Nemotron Nano 30B (NVIDIA; exact HF id not stated)": NEMOTRON_NANO,
})
# rows of models the catalog cannot size yet: left out of the fit and the tables, counted by reason
UNMODELLED: dict[str, str] = {}
ENGINES = {"TensorRT-LLM": "tensorrt-llm", "NVIDIA NIM (TensorRT-LLM backend)": "tensorrt-llm",
           "vLLM": "vllm", "SGLang": "sglang", "HF TGI (SageMaker LLM DLC)": "tgi"}
STATS = {"mean": "mean", "na": "mean", "median": "p50", "p50": "p50", "p95": "p95", "p99": "p99"}

BENCHMARK_ASSUMPTIONS: dict[str, object] = {
    "sharegpt_mean_tokens": {
        "prompt": 215, "output": 194,
        "why": "ShareGPT rows give no lengths. Output 194 = sgl060 offline output tok/s / requests/s "
               "(4281.51 / 22.03); prompt 215 is the usual mean of vLLM/SGLang bench_serving ShareGPT "
               "samples with a Llama tokenizer (not stated by the sources)"},
    "trt013_engine_limits": {
        "kv_cache_gpu_mem_fraction": 0.95, "max_batch_size_cap": 4096, "max_num_tokens_cap": 32768,
        "why": "TensorRT-LLM 0.13 perf-overview.md builds every engine with `trtllm-bench --model $model_name build "
               "--tp_size $tp_size --quantization FP8 --dataset $dataset_file`, i.e. max_batch_size and max_num_tokens "
               "from the dataset's ISL/OSL by tensorrt_llm/bench/build/tuning.py calc_engine_setting / "
               "finetune_setting (its oldest stored version, ASSUMED 0.13's): KV bytes per token 2 x layers x "
               "max(tp, kv_heads) x head_size x (1 for FP8 KV, else 2); engine size params x (1 for FP8, else 2) GB; "
               "kv_cache_max_requests = (nvml total GiB x GPUs - engine size) x 0.95 / bytes per token / (ISL + OSL); "
               "raw_bs = min(requests, 4096) / pp; raw_token = min(raw_bs x (1 + ISL / OSL), 32768); max_bs rounded "
               "up (min 64; to 32 below 256, 128 below 1024, else 256); max_num_tokens rounded up (min 2048; to 256 "
               "below 4096, 512 below 8192, else 1024). The runtime's KV cache (GUARANTEED_NO_EVICT) then limits "
               "the batch further"},
    "gpustackq_engine_limits": {
        "max_num_seqs": 1000, "max_num_batched_tokens": 8192,
        "why": "superseded by vllm_v1_defaults (vLLM 0.9.2: H100 1024 / 8192, A100 256 / 2048); the benchmark "
               "sends 1,000 prompts at once (a burst), so the engine batches at most 1,000"},
    "awq_unfused_rows": "AWQ rows served on the unfused AWQ kernels (ReplicaConfig.awq_marlin False): a command with "
                        "`--quantization awq` (r2rz's L4 runs), and gpustackq's row 'AWQ' beside its row 'AWQ Marlin' "
                        "on the same page (ASSUMED --quantization awq: the page names the kernel only for the Marlin "
                        "rows)",
    "nim_kv_cache_dtype": {"value": "fp8", "why": "NIM FP8 TensorRT-LLM profiles use an FP8 KV cache"},
    "multi_step_itl": "vLLM 0.6.0 with --num-scheduler-steps N emits tokens in bursts of N, so its "
                      "measured ITL is N decode steps, and a new request waits on average half a "
                      "multi-step run (N/2 steps) before its prefill is scheduled",
    "tgi_time_per_token": "TGI time_per_token = (prefill + decode time) / generated tokens, without queueing",
    "burst": "request_rate inf with num_prompts N (GPUStack pages, gpustackq's 1,000 prompts) is a finite burst of "
             "N prompts sent at once (sizing.perf.load.estimate_burst), not an endless offline steady state",
    "sharegpt_tail": {"prompt_p95_over_mean": 3.0, "output_p95_over_mean": 3.0,
                      "why": "ShareGPT lengths are long-tailed; the sources give means only. p95 = 3 x mean is ASSUMED "
                             "(it sets the burst's drain and the prompt-length spread of TTFT percentiles)"},
    "serving_flags": "per-row flags from `notes` (the block's label first, then its command): "
                     "--max-num-batched-tokens, --max-num-seqs / --max-running-requests, --async-scheduling, "
                     "--enforce-eager / --disable-cuda-graph (CUDA graphs off), --gpu-memory-utilization / "
                     "--mem-fraction-static; also as a settings list without dashes (dsh100's 'chunked "
                     "prefill=TRUE, max-num-batched-tokens=512, max-num-seqs=512', from dstack's README)",
    "vllm_v1_defaults": {
        "rule": "vLLM >= 0.9 (V1) OpenAI server without --max-num-seqs / --max-num-batched-tokens: 1024 "
                "sequences and 8192 batched tokens on GPUs with >= 70 GiB that are not A100; otherwise "
                "(A100, L4, A10G, L40S) 256 sequences and 2048 batched tokens; before 0.10 (ASSUMED) A100-80GB "
                "too gets 1024 / 8192",
        "source": "vllm/engine/arg_utils.py EngineArgs._set_default_args_v1 / get_batch_defaults: "
                  "'if device_memory >= 70 * GiB_bytes and \"a100\" not in device_name: ... OPENAI_API_SERVER: "
                  "8192 ... 1024' else 2048 / 256 "
                  "(the A100 exception from vLLM PR #17885, 'Setting large max_num_batched_tokens for A100 reduces "
                  "throughput'); ASSUMED first released in 0.10 (gpustackq's 0.9.2 on A100 runs the large defaults)"},
    "r2rz_long_context": {
        "prefix_cache_hit_rate": 0.95,
        "why": "ASSUMED: the long regime sends one RAG context (~1,650 tokens) with each question, so vLLM's "
               "default prefix caching (V1) and SGLang's RadixAttention serve all but the question from cache; "
               "the measured TTFT at concurrency 1 (41-120 ms on one L4) is below what computing 1,650 tokens "
               "takes even at the L4's full datasheet FP16 peak (~190 ms). The workload in fact repeats 10 distinct "
               "long prompts (prompts/workload.jsonl; see r2rz_short_repeats), so the engines' rule would give "
               "1,648 / 1,650 (vLLM) and 1,649 / 1,650 (SGLang); tried 2026-12-03 and not kept (docs/perf-model.md, "
               "helper sglttft): the first wave of 64 long prompts waits ~900 ms outside the GPU, which 0.95 stands in "
               "for; the first run's (c = 1) TTFT percentiles follow r2rz_long_first_pass instead"},
    "r2rz_long_first_pass": {
        "first_seen_ranks": [0, 1, 2, 4, 5, 6, 7, 8, 20, 30], "measured": 100, "warmup_per_user": 2,
        "first_concurrency": 1,
        "why": "ree2raz/inference-bench prompts/workload.jsonl: the long regime's 100 prompts are 10 distinct ones, "
               "first seen at these ranks; run_benchmark_impl (bench_lib.py) warms up with prompts[:concurrency * 2] "
               "and then measures all 100, and run_all runs the long regime's concurrencies (LONG_CONCURRENCY_LEVELS = "
               "[1, 16, 64]) in that order on one "
               "server after the short regime (whose prompts share no long prefix). So the first long run (c = 1) "
               "computes in full the distinct prompts its warm-up did not send (8 of 100: the 8 slowest, "
               "raw/vllm_long_c1_r1.jsonl 399-435 ms beside 72-78 ms, raw/sglang_long_c1_r1.jsonl 435-467 ms beside "
               "115-126 ms), and a TTFT percentile above 1 - 8/100 (bench_lib.pct, linear between sorted ranks) is "
               "such a request: no prefix hit. Its percentiles below that are repeats, a hit by the engines' rule "
               "(r2rz_short_repeats: 1,648 / 1,650 tokens for vLLM, 1,649 / 1,650 for SGLang). Later runs (c = 16, "
               "64) keep r2rz_long_context's 0.95, which stands in for the time their waves spend outside the GPU"},
    "r2rz_short_repeats": {
        "why": "the short regime's prompts repeat: ree2raz/inference-bench prompts/workload.jsonl holds 100 short "
               "prompts of which 49 are distinct, run_benchmark_impl (bench_lib.py) warms up with prompts[:2c] and "
               "then sends all 100, and one server runs every concurrency in turn (modal_v2_*.py run_all; the "
               "summary's repeats call the same warm class), so a prompt is a full prefix hit (vLLM's default prefix "
               "caching in V1, SGLang's RadixAttention) less what the engine recomputes. The hit caps at the prompt "
               "less one token ('When all tokens hit the cache, we must recompute the last token to obtain logits', "
               "vllm/v1/core/kv_cache_manager.py get_computed_blocks: max_cache_hit_length = num_tokens - 1; SGLang "
               "schedule_batch.py Req: max_prefix_len = input_len - 1), in whole blocks for vLLM (full blocks of "
               "vllm_kv_block_size tokens are hashed) and per token for SGLang (server_args.py page_size 1). The "
               "first pass of the first concurrency on a fresh server (c = 1, half its prompts unseen) hits less; "
               "one prompt's prefill is weight-read bound there either way"},
    "tgi_eager": {
        "rule": "TGI before 1.4 runs without CUDA graphs (every kernel launched from Python each step)",
        "source": "huggingface/text-generation-inference PR #1428 'feat: experimental support for cuda graphs' "
                  "(first in 1.4), PR #1703 'Add cuda graphs sizes and make it default' (2024-04-04); hfsm's "
                  "SageMaker LLM DLC runs TGI 1.0.3 (2023-09)"},
    "trtllm_pytorch_eager": {
        "rule": "TensorRT-LLM's PyTorch backend before 1.0 runs without CUDA graphs unless its options enable them",
        "source": "NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/config.py PyTorchConfig: 'If true, use CUDA "
                  "graphs for decoding ... use_cuda_graph: bool = False'; dstack's DeepSeek-R1 runs (dsr1h200, "
                  "0.17 'trtllm-serve --backend pytorch ...') pass no extra_llm_api_options"},
    "vllm_v0_prefill_budget": {
        "rule": "vLLM V0 (before 0.8) serving an MLA model without --max-num-batched-tokens: no chunked prefill "
                "unless --enable-chunked-prefill, and then max(max_model_len, 2048) prompt tokens per step "
                "(DeepSeek-R1: 163,840, whole prompts, a round of up to 51 prompts of 3,200 tokens in one "
                "prefill step); with the flag, 2048",
        "source": "sizing/data/engine_prefill_budget.csv (vllm 0.8.0 engine/arg_utils.py _set_default_args_v0, "
                  "config.py SchedulerConfig.__post_init__); dstack's random-dataset runs on the 0.7.4 nightly "
                  "pass no flag, its prefix-caching runs pass --enable-chunked-prefill"},
    "prefill_only_steps": "vLLM V0 serving an MLA model without --enable-chunked-prefill, and SGLang before 0.5 "
                          "without --enable-mixed-chunk, run prompts in prefill-only steps and decode only when "
                          "none wait (sizing/data/engine_prefill_budget.csv, read in their schedulers): a "
                          "fixed-length closed loop stays in lockstep rounds however many steps a round's "
                          "prefill takes (sizing.perf.load._prefill_priority_rounds)",
    "serving_flag_trtllm": "trtllm-serve's --max_num_tokens and --max_batch_size are its max_num_batched_tokens and "
                           "max_num_seqs",
    "synchronized_closed_loop": "closed-loop rows with fixed lengths run in lockstep rounds (sizing.perf.load "
                                "estimate_closed_loop synchronized=True); ShareGPT rows do not",
    "deepseek_v32": {
        "index_topk": 2048, "index_n_heads": 64, "index_head_dim": 128,
        "why": "DeepSeek-V3.2 rows are sized as the catalog's DeepSeek-V3 with DeepSeek sparse attention added "
               "(deepseek-ai/DeepSeek-V3.2-Exp inference/model.py ModelArgs index_n_heads 64, index_head_dim 128, "
               "index_topk 2048; its config.json is V3's plus these and model_type deepseek_v32); the indexer's "
               "~0.8B weights (0.1%) are not added to V3's 671B"},
    "glm_configs": "GLM-4.5-Air and GLM-4.6 (and their -FP8 checkpoints at fp8 weights) are sized from the "
                   "config.json reconstructions in bench/calibration/configs (sources in its SOURCES.md)",
    "nemotron_nano": "vultrb200's 'Nemotron Nano 30B' (its notes: 'likely NVIDIA Nemotron-3-Nano-30B-A3B FP8, "
                     "ASSUMED') is sized from NVIDIA-Nemotron-3-Nano-30B-A3B's config.json (bench/hybrid_configs)",
    "reprinted_blocks": {
        "gpsglmairh": {
            "label": "Other Benchmark Cases", "copy_of": "gpsglmaira",
            "why": "GPUStack's GLM-4.5-Air H100 page (docs/performance-lab/glm-4.5-air/h100.md, gpustack/gpustack) "
                   "prints under 'Other Benchmark Cases' the A100 page's vLLM and SGLang tables digit for digit "
                   "(vLLM 'random 32K input': 'Total Token throughput (tok/s): 6435.97', 'Mean TTFT (ms): "
                   "248013.29' on both pages; all 96 rows gpsglmairh-0085..0180 equal gpsglmaira's), while the "
                   "H100 page's own conclusion gives that vLLM baseline on H100 as 'Very Long Prompt | Total TPS: "
                   "20732.85' (Long 21705.53, Medium 22582.76, Short 7066.67; the A100 page's conclusion: 6435.97, "
                   "6975.10, 8643.75, 6271.24). The rows are the A100 run, which gpsglmaira already holds, not a "
                   "measurement of the H100 configuration they are filed under: left out and counted"}},
    "zero_values": "rows whose value is 0 (gpsq359b-0035, gpsq35moe-0075: a median TTFT of 0.00 ms from guidellm, "
                   "whose medians the pages call anomalous) are left out and counted",
    "guidellm_capped_burst": "gpsq359b / gpsq35moe rows ('ShareGPT (guidellm profile ...), request_rate=1000', 1,000 "
                             "requests, 'peak concurrent requests=512') are a burst held to guidellm's 512 requests in "
                             "flight (guidellm config.py Settings 'max_concurrency: int = 512'; benchmark-runner "
                             "scenario_builder.py DEFAULT_MAX_CONCURRENCY = 512), not a steady closed loop of 512 "
                             "users: the first 512 go out at once (a burst), each of the others when one finishes "
                             "(a closed loop of 512); its wait in the client is outside the TTFT guidellm measures "
                             "(sizing.perf.capped_burst, the run's total from the notes' 'N reqs'). Every guidellm "
                             "row at an unlimited rate is a burst of its peak in flight: the Throughput profile's "
                             "1,000 requests (peak 512), the 35B page's Long Context (100 requests, peak 100) and "
                             "Generation Heavy (200, peak 200) (GPUStack profiles_config.yaml)",
    "guidellm_constant_rate": "GPUStack's benchmark worker runs `benchmark-runner benchmark run --profile constant "
                              "--rate <request_rate> --max-requests <total>` (gpustack/worker/benchmark/runner.py "
                              "_build_command_args); guidellm's constant profile sends at uniform intervals "
                              "(scheduler/strategies.py AsyncConstantStrategy: 'Requests arrive at uniform "
                              "intervals'). Rows at a finite rate (gpsq359bl/gpsq35moel 1/4/8/16 req/s, the 9B "
                              "page's Long Context and Generation Heavy at 1 req/s: GPUStack profiles_config.yaml "
                              "'request_rate: 1') are an open loop at that rate; their `concurrency` column is the "
                              "page's 'peak concurrent requests', an outcome, not a cap",
    "bench_serve_fewer_prompts": "`vllm bench serve --max-concurrency c --num-prompts N` at an infinite rate limits "
                                 "in-flight requests with asyncio.Semaphore(c) (vllm/benchmarks/serve.py): with N <= c "
                                 "(vultrb200's 400 prompts at c = 512 and 1024) every prompt is sent at once, a burst "
                                 "of N, not a closed loop of c; with N > c the first c go at once and each other "
                                 "when one finishes, timed from when it is sent (request_func starts its clock "
                                 "after the semaphore): a burst of c held to c in flight (sizing.perf.capped_burst)",
    "hybrid_state_cache": "Qwen3.5 and Nemotron-H rows keep one linear-attention / Mamba state per running sequence "
                          "(vLLM's default mamba_cache_mode 'none', vllm/config/cache.py; ASSUMED for every such row, "
                          "SGLang's too)",
    "speculative_decoding": "rows whose command enables speculative decoding run it in the model "
                            "(sizing.perf.spec_decode): vLLM `--speculative-config {\"method\": M, "
                            "\"num_speculative_tokens\": k}`; SGLang `--speculative-algorithm EAGLE|NEXTN "
                            "--speculative-num-steps s --speculative-eagle-topk 1` without a draft model path is "
                            "its NextN (MTP) layer drafting s tokens (SGLang server_args: NEXTN is EAGLE with the "
                            "model's own nextn layer as draft; DeepSeek checkpoints load it by default). No page "
                            "prints the acceptance length, so sizing/data/spec_decode_acceptance.csv gives it. "
                            "ITL rows from vllm bench serve time the gaps between streamed chunks, and a step's "
                            "accepted tokens stream as one chunk (benchmarks endpoint_request_func: "
                            "`output.itl.append(timestamp - most_recent_timestamp)` once per chunk): their ITL is "
                            "acceptance length x the per-token time, TPOT ((e2e - ttft) / (tokens - 1)) is not",
    "r2rz_tpot": "r2rz TPOT percentiles are over requests' (e2e - ttft) / (tokens - 1): the model's TPOT percentiles",
}


def _repeat_hit(prompt: float, engine: str, block: int) -> float:
    """Share of a repeated prompt (tokens) served from the prefix cache: all but the last token, in whole
    `block`-token blocks for vLLM, per token for SGLang (BENCHMARK_ASSUMPTIONS["r2rz_short_repeats"])."""
    if prompt <= 1:
        return 0.0
    cached = (prompt - 1) // block * block if engine == "vllm" else prompt - 1
    return cached / prompt


def _first_pass_misses(concurrency: int) -> int:
    """Prompts (of the measured run) that r2rz's first long-regime run at `concurrency` computes in full: the
    distinct long prompts its warm-up (the first 2 x concurrency prompts) did not send
    (BENCHMARK_ASSUMPTIONS["r2rz_long_first_pass"])."""
    fp = BENCHMARK_ASSUMPTIONS["r2rz_long_first_pass"]
    warm = int(fp["warmup_per_user"]) * concurrency  # type: ignore[index]
    return sum(1 for k in fp["first_seen_ranks"] if k >= warm)  # type: ignore[index, union-attr]


def _precision(weight_dtype: str) -> str:
    w = weight_dtype.lower()
    if w.startswith("fp8") or w.startswith("int8"):
        return "fp8"  # W8A8 FP8; int8 GPTQ is W8A16 = how 8-bit weights run weight-only on Ampere
    if "awq" in w:
        return "int4-awq"
    if w.startswith("int4"):
        return "int4-gptq"
    return w.split()[0]


def _flag(notes: str, name: str) -> str | None:
    """A serving flag's value from a row's notes: the block label's first (it names the varied
    flag; the command shown beside it is sometimes the page's base command), else the command's."""
    label = re.search(r"block label: ([^;]*)", notes)
    for text in ([label.group(1)] if label else []) + [notes]:
        m = re.search(rf"{re.escape(name)}[ =]([0-9.]+)", text)
        if m:
            return m.group(1)
    # BENCHMARK_ASSUMPTIONS["serving_flags"]: a settings list ("chunked prefill=TRUE, max-num-batched-tokens=512")
    m = re.search(rf"(?:^|[;,] ){re.escape(name.lstrip('-'))}=([0-9.]+)", notes)
    return m.group(1) if m else None


def _spec(notes: str, engine: str) -> SpecDecode | None:
    """BENCHMARK_ASSUMPTIONS['speculative_decoding']: the row's speculative decoding from its command."""
    m = re.search(r'--speculative-config[ =]\s*\{[^}]*"method"\s*:\s*"(\w+)"[^}]*"num_speculative_tokens"\s*:\s*(\d+)',
                  notes)
    if m:
        method = m.group(1).lower()  # vLLM's per-model aliases (deepseek_mtp, qwen3_next_mtp, ...) are its MTP
        return SpecDecode("mtp" if method.endswith("_mtp") else method, int(m.group(2)))
    m = re.search(r"--speculative-algorithm (EAGLE3?|NEXTN)\b", notes)
    if m and engine == "sglang":
        steps = _flag(notes, "--speculative-num-steps")
        topk = _flag(notes, "--speculative-eagle-topk")
        assert steps is not None and topk in (None, "1"), notes
        method = "eagle3" if m.group(1) == "EAGLE3" else ("eagle" if "--speculative-draft-model-path" in notes
                                                           else "mtp")
        return SpecDecode(method, int(steps))
    return None


def _version(version: str) -> tuple[int, int]:
    """(major, minor) of an engine version string; (0, 0) when it names none."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _vllm_v1(version: str) -> bool:
    m = re.match(r"(\d+)\.(\d+)", version)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (0, 8)


def _vllm_v1_defaults(gpu: str, version: str) -> dict[str, int | float | bool]:
    """BENCHMARK_ASSUMPTIONS['vllm_v1_defaults']: the engine limits a vLLM V1 server picks by itself."""
    m = re.match(r"(\d+)\.(\d+)", version)
    minor = (int(m.group(1)), int(m.group(2))) if m else (0, 11)
    big = gpu in ("H100-SXM", "H100-PCIe", "H200", "B200", "A100-80GB") and not (gpu.startswith("A100")
                                                                                  and minor >= (0, 10))
    return {"max_num_seqs": 1024, "max_num_batched_tokens": 8192} if big else \
        {"max_num_seqs": 256, "max_num_batched_tokens": 2048}


@dataclass(frozen=True)
class CalRow:
    id: str
    source: str
    metric: str
    value: float
    cfg: ReplicaConfig
    shape: WorkloadShape
    mode: str  # closed | open | offline | burst
    load: float  # concurrency (closed), requests/s (open), prompts (burst)
    multi_step: int
    stat: str = "mean"  # mean | p50 | p95 | p99
    gpu: str = ""
    arrivals: str = "poisson"  # open loop: poisson | uniform (a constant-rate client)
    requests: int = 0  # a burst held to `load` in flight: the run's total requests (0: all `load` at once)
    tokens_per_chunk: float = 1.0  # tokens a streamed chunk carries (speculative decoding: the acceptance length)


def _model(catalog: Catalog, name: str) -> ModelArch:
    if name != "deepseek-v3.2":
        return catalog.model(name)
    dsa = BENCHMARK_ASSUMPTIONS["deepseek_v32"]
    assert isinstance(dsa, dict)
    return dataclasses.replace(catalog.model("deepseek-v3"), hf_id="deepseek-ai/DeepSeek-V3.2",
                               short_name="deepseek-v3.2", model_type="deepseek_v32", index_topk=dsa["index_topk"],
                               index_n_heads=dsa["index_n_heads"], index_head_dim=dsa["index_head_dim"])


def trtllm_bench_build_limits(catalog: Catalog, model: ModelArch, gpu: str, tp: int, pp: int, fp8_weights: bool,
                              fp8_kv: bool, isl: int, osl: int) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) that `trtllm-bench build --dataset` gives an engine for a dataset of
    fixed ISL / OSL (BENCHMARK_ASSUMPTIONS["trt013_engine_limits"], the heuristic's own arithmetic: its
    engine size mixes 1e9 parameters with GiB of device memory as the code does)."""
    lim = BENCHMARK_ASSUMPTIONS["trt013_engine_limits"]
    assert isinstance(lim, dict)
    kv_gib_per_token = 2 * model.num_layers * max(tp, model.num_kv_heads) * (model.head_dim or 0) \
        * (1 if fp8_kv else 2) / 1024 ** 3
    engine_gb = model.params_total_b * (1 if fp8_weights else 2)
    available = catalog.gpu(gpu).memory_gib * tp * pp - engine_gb
    requests = available * float(lim["kv_cache_gpu_mem_fraction"]) / kv_gib_per_token / (isl + osl)
    raw_bs = min(requests, float(lim["max_batch_size_cap"])) / pp
    raw_token = min(raw_bs * (1 + isl / osl), float(lim["max_num_tokens_cap"]))
    def up(x: float, unit: int) -> int:  # the heuristic rounds up to a unit that grows with the value
        return unit * math.ceil(x / unit)

    bs = max(64, up(raw_bs, 32)) if raw_bs < 256 else up(raw_bs, 128 if raw_bs < 1024 else 256)
    tok = max(2048, up(raw_token, 256)) if raw_token < 4096 else up(raw_token, 512 if raw_token < 8192 else 1024)
    return bs, tok


def load_rows(catalog: Catalog, path: Path | str | None = None,
              skipped: dict[str, int] | None = None) -> list[CalRow]:
    """Rows of one file, or of all calibration files (path None); rows of UNMODELLED models are left
    out and counted by reason in `skipped` when given."""
    if path is None:
        return [r for p in DEFAULT_CSVS for r in load_rows(catalog, p, skipped)]
    a = BENCHMARK_ASSUMPTIONS
    share = a["sharegpt_mean_tokens"]
    tail = a["sharegpt_tail"]
    reprinted = a["reprinted_blocks"]  # BENCHMARK_ASSUMPTIONS["reprinted_blocks"]: another page's run
    assert isinstance(share, dict) and isinstance(tail, dict) and isinstance(reprinted, dict)
    out: list[CalRow] = []
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            src = r["id"].split("-")[0]
            if float(r["value"]) <= 0:  # BENCHMARK_ASSUMPTIONS["zero_values"]
                if skipped is not None:
                    why = "a measured value of 0 (guidellm's anomalous medians: nothing to compare)"
                    skipped[why] = skipped.get(why, 0) + 1
                continue
            rep = reprinted.get(src)
            if rep is not None and r["notes"].startswith(rep["label"]):
                if skipped is not None:
                    why = f"reprinted from another page ({rep['copy_of']}'s {rep['label']} tables: not this page's run)"
                    skipped[why] = skipped.get(why, 0) + 1
                continue
            if r["model"] in UNMODELLED:
                if skipped is not None:
                    why = UNMODELLED[r["model"]]
                    skipped[why] = skipped.get(why, 0) + 1
                continue
            engine = ENGINES[r["engine"]]
            notes = r["notes"]
            kv = "fp8" if "fp8" in r["kv_dtype"] else "auto"
            if src == "nim" and not r["kv_dtype"]:
                kv = str(a["nim_kv_cache_dtype"]["value"])  # type: ignore[index]
            limits: dict[str, int | float | bool] = {}
            if src == "trt013":
                bs, tok = trtllm_bench_build_limits(catalog, _model(catalog, MODELS[r["model"]]), r["gpu"],
                                                    int(r["tp"]), int(r["pp"] or 1), "fp8" in r["weight_dtype"],
                                                    kv == "fp8", int(r["isl"]), int(r["osl"]))
                limits = {"max_num_seqs": bs, "max_num_batched_tokens": tok}
            if src == "gpustackq":
                lim = a[f"{src}_engine_limits"]
                assert isinstance(lim, dict)
                limits = {"max_num_seqs": lim["max_num_seqs"], "max_num_batched_tokens": lim["max_num_batched_tokens"]}
            if engine == "vllm" and src != "gpustackq" and _vllm_v1(r["engine_version"]):
                limits.update(_vllm_v1_defaults(r["gpu"], r["engine_version"]))
            elif src == "gpustackq":
                limits.update(_vllm_v1_defaults(r["gpu"], "0.9.2"))
                limits["max_num_seqs"] = min(int(limits["max_num_seqs"]), 1000)
            elif engine == "vllm" and (budget := catalog.engine_prefill_budget(
                    engine, _version(r["engine_version"]) if _version(r["engine_version"]) != (0, 0) else None,
                    _model(catalog, MODELS[r["model"]]),
                    "--enable-chunked-prefill" in notes)) is not None:
                limits["max_num_batched_tokens"] = budget  # BENCHMARK_ASSUMPTIONS["vllm_v0_prefill_budget"]
            if (v := _flag(notes, "--max-num-batched-tokens") or _flag(notes, "--max_num_tokens")) is not None:
                limits["max_num_batched_tokens"] = int(v)
            if (v := _flag(notes, "--max-num-seqs") or _flag(notes, "--max-running-requests")
                    or _flag(notes, "--max_batch_size")) is not None:
                limits["max_num_seqs"] = int(v)
            if (v := _flag(notes, "--gpu-memory-utilization") or _flag(notes, "--mem-fraction-static")) is not None:
                limits["gpu_memory_utilization"] = float(v)
            if "--enforce-eager" in notes or "--disable-cuda-graph" in notes or (
                    engine == "tgi" and _version(r["engine_version"]) < (1, 4)) or (  # ["tgi_eager"]
                    engine == "tensorrt-llm" and "--backend pytorch" in notes and "cuda_graph" not in notes
                    and _version(r["engine_version"]) < (1, 0)):  # BENCHMARK_ASSUMPTIONS["trtllm_pytorch_eager"]
                limits["cuda_graphs"] = False
            if "--async-scheduling" in notes:
                limits["async_scheduling"] = True
            # BENCHMARK_ASSUMPTIONS["awq_unfused_rows"]
            if re.search(r"--quantization awq(?!_marlin)\b", notes) or (
                    src == "gpustackq" and "awq" in r["weight_dtype"].lower()
                    and "marlin" not in r["weight_dtype"].lower()):
                limits["awq_marlin"] = False
            ver = _version(r["engine_version"])
            # BENCHMARK_ASSUMPTIONS["prefill_only_steps"]
            limits["prefill_only_steps"] = catalog.engine_prefill_only_steps(
                engine, ver if ver != (0, 0) else None, _model(catalog, MODELS[r["model"]]),
                "--enable-chunked-prefill" in notes if engine == "vllm" else "--enable-mixed-chunk" in notes)
            spec = _spec(notes, engine)
            if spec is not None:
                limits["spec"] = spec  # type: ignore[assignment]
            cfg = ReplicaConfig(model=_model(catalog, MODELS[r["model"]]), gpu=r["gpu"],
                                precision=_precision(r["weight_dtype"]), tp=int(r["tp"]), pp=int(r["pp"] or 1),
                                kv_cache_dtype=kv, engine=engine,
                                # sizing/data/engine_kernels.csv: kernel counts of early engine versions
                                engine_version=ver if (ver := _version(r["engine_version"])) != (0, 0) else None,
                                **limits)  # type: ignore[arg-type]
            isl = float(r["isl"]) if r["isl"] else float(share["prompt"])
            osl = float(r["osl"]) if r["osl"] else float(share["output"])
            sharegpt = "sharegpt" in notes.lower() or not r["isl"]
            hit = 0.0
            if src == "r2rz" and "long regime" in notes:  # BENCHMARK_ASSUMPTIONS["r2rz_long_context"]
                hit = float(a["r2rz_long_context"]["prefix_cache_hit_rate"])  # type: ignore[index]
                q = {"p95": 0.95, "p99": 0.99}.get(STATS.get(r["stat"], "mean"))
                fp = a["r2rz_long_first_pass"]
                users = int(float(r["concurrency"] or 0))
                if r["metric"] == "ttft_ms" and q is not None and users == int(fp["first_concurrency"]) \
                        and _first_pass_misses(users) > (1.0 - q) * float(fp["measured"]):  # type: ignore[index]
                    hit = 0.0  # BENCHMARK_ASSUMPTIONS["r2rz_long_first_pass"]: the percentile is a first-seen prompt
                elif r["metric"] == "ttft_ms" and users == int(fp["first_concurrency"]):
                    # the first run's other percentiles are repeats of a prompt it has computed: the engine's rule
                    hit = _repeat_hit(isl, engine, int(catalog.number("vllm_kv_block_size")))
            elif src == "r2rz" and "short regime" in notes:  # BENCHMARK_ASSUMPTIONS["r2rz_short_repeats"]
                hit = _repeat_hit(isl, engine, int(catalog.number("vllm_kv_block_size")))
            shape = WorkloadShape(isl, osl, isl * tail["prompt_p95_over_mean"] if sharegpt else None,
                                  osl * tail["output_p95_over_mean"] if sharegpt else None, hit)
            rate = r["request_rate"]
            requests = 0
            n_prompts = re.search(r"num_prompts=(\d+)", notes)
            guidellm = "guidellm" in notes
            if guidellm and rate and rate != "inf" and "request_rate=1000)" not in notes:
                # BENCHMARK_ASSUMPTIONS["guidellm_constant_rate"]: `concurrency` is the peak the server held
                mode, load = "open", float(rate)
            elif guidellm and r["concurrency"]:
                # BENCHMARK_ASSUMPTIONS["guidellm_capped_burst"]
                mode, load = "burst", float(r["concurrency"])
                total = re.search(r"(\d+) reqs\)", notes)
                if total:
                    requests = int(total.group(1))
                elif "profile 'Throughput'" in notes:
                    requests = 1000  # GPUStack profiles_config.yaml Throughput: total_requests 1000
            elif r["concurrency"] and n_prompts and rate == "inf":
                # BENCHMARK_ASSUMPTIONS["bench_serve_fewer_prompts"]: N prompts at most c in flight
                mode, load = "burst", min(float(n_prompts.group(1)), float(r["concurrency"]))
                requests = int(n_prompts.group(1))
            elif r["concurrency"]:
                mode, load = "closed", float(r["concurrency"])
            elif rate and rate != "inf":
                mode, load = "open", float(rate)
            elif n_prompts or src == "gpustackq":
                mode, load = "burst", float(n_prompts.group(1)) if n_prompts else 1000.0
            else:
                mode, load = "offline", 0.0
            m = re.search(r"num-scheduler-steps (\d+)", r["engine_version"])
            out.append(CalRow(r["id"], src, r["metric"], float(r["value"]), cfg, shape,
                              mode, load, int(m.group(1)) if m else 1, STATS.get(r["stat"], "mean"), r["gpu"],
                              "uniform" if guidellm and mode == "open" else "poisson",
                              requests if requests > load else 0,
                              acceptance_length(catalog, cfg.model, spec) if spec is not None else 1.0))
    return out


def estimate(catalog: Catalog, row: CalRow) -> LoadEstimate:
    if row.mode == "closed":
        # fixed synthetic lengths: requests started together run in lockstep rounds
        return estimate_closed_loop(catalog, row.cfg, row.shape, int(row.load),
                                    synchronized=row.shape.output_tokens_p95 is None)
    if row.mode == "open":
        return estimate_open_loop(catalog, row.cfg, row.shape, row.load, uniform_arrivals=row.arrivals == "uniform")
    if row.mode == "burst" and row.requests:
        return estimate_capped_burst(catalog, row.cfg, row.shape, row.requests, int(row.load),
                                     synchronized=row.shape.output_tokens_p95 is None)
    if row.mode == "burst":
        return estimate_burst(catalog, row.cfg, row.shape, int(row.load))
    return estimate_offline(catalog, row.cfg, row.shape)


def metric_group(metric: str) -> str:
    """throughput | ttft | itl | e2e: the groups accuracy.py reports."""
    if metric in ("output_tok_s_total", "output_tok_s_per_gpu", "total_tok_s_total", "requests_s"):
        return "throughput"
    if metric in ("tpot_ms", "itl_ms"):
        return "itl"
    return "ttft" if metric == "ttft_ms" else "e2e"


def predict(catalog: Catalog, row: CalRow) -> float:
    """The model's value for this row's metric at the row's statistic (same unit as the row)."""
    return predict_from(row, estimate(catalog, row))


def predict_from(row: CalRow, e: LoadEstimate) -> float:
    """Row's metric from an estimate (rows of one scenario share one estimate)."""
    isl, osl = row.shape.prompt_tokens, row.shape.output_tokens
    q = row.stat
    ms = row.multi_step
    table: dict[str, Callable[[], float]] = {
        "output_tok_s_total": lambda: e.output_tokens_per_s,
        "output_tok_s_per_gpu": lambda: e.output_tokens_per_s / (row.cfg.tp * row.cfg.pp),
        "total_tok_s_total": lambda: e.output_tokens_per_s * (isl + osl) / osl,
        "requests_s": lambda: e.output_tokens_per_s / osl,
        "ttft_ms": lambda: e.percentile("ttft", q) + (ms / 2 * e.itl_ms if ms > 1 else 0.0),
        "itl_ms": lambda: (e.percentile("itl", q) * ms if ms == 1 else e.itl_ms * ms) * row.tokens_per_chunk,
        "tpot_ms": lambda: (e.e2e_latency_ms / osl if row.cfg.engine == "tgi" else e.percentile("tpot", q)),
        "e2e_latency_ms": lambda: e.percentile("e2e", q),
    }
    v = table[row.metric]()
    return v if math.isfinite(v) and v > 0 else 1e12


def scenario_key(row: CalRow) -> tuple[object, ...]:
    """Rows with the same key share one estimate."""
    return (row.cfg, row.shape, row.mode, row.load, row.arrivals, row.requests)
