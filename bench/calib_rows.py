"""How each published measurement in ../shared/calibration/perf_points.csv maps onto the model.

Shared by bench/calibrate.py and bench/accuracy.py. Every interpretation of a source that the
CSV does not state is an ASSUMPTION listed in BENCHMARK_ASSUMPTIONS, which calibrate.py copies
into sizing/data/perf_calibration.json so the fit says what it assumed.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sizing.catalog import Catalog
from sizing.perf import (
    LoadEstimate,
    ReplicaConfig,
    WorkloadShape,
    estimate_closed_loop,
    estimate_offline,
    estimate_open_loop,
)

DEFAULT_CSV = Path(__file__).resolve().parents[1] / ".." / "shared" / "calibration" / "perf_points.csv"

MODELS = {
    "Llama-2-7B": "llama-2-7b", "Llama-2-13B": "llama-2-13b", "Llama-2-70B": "llama-2-70b",
    "Llama-3.1-8B": "llama-3.1-8b-instruct", "Llama-3.1-70B": "llama-3.1-70b-instruct",
    "Llama-3.1-405B": "llama-3.1-405b-instruct", "Llama-3.3-70B": "llama-3.3-70b-instruct",
    "Mistral-7B": "mistral-7b-instruct-v0.3", "Mixtral-8x7B": "mixtral-8x7b-instruct", "Qwen3-8B": "qwen3-8b",
}
ENGINES = {"TensorRT-LLM": "tensorrt-llm", "NVIDIA NIM (TensorRT-LLM backend)": "tensorrt-llm",
           "vLLM": "vllm", "SGLang": "sglang", "HF TGI (SageMaker LLM DLC)": "tgi"}

BENCHMARK_ASSUMPTIONS: dict[str, object] = {
    "sharegpt_mean_tokens": {
        "prompt": 215, "output": 194,
        "why": "ShareGPT rows give no lengths. Output 194 = sgl060 offline output tok/s / requests/s "
               "(4281.51 / 22.03); prompt 215 is the usual mean of vLLM/SGLang bench_serving ShareGPT "
               "samples with a Llama tokenizer (not stated by the sources)"},
    "trt013_engine_limits": {
        "max_num_seqs": 4096, "max_num_batched_tokens": 8192,
        "why": "trtllm-bench builds engines with a large max batch (heuristic up to 4096) and "
               "max_num_tokens 8192; the KV cache then limits the batch"},
    "gpustackq_engine_limits": {
        "max_num_seqs": 1000, "max_num_batched_tokens": 8192,
        "why": "vLLM 0.9.2 V1 OpenAI-server defaults on >= 70 GiB GPUs are 1024 sequences and 8192 batched "
               "tokens; the benchmark sends 1,000 prompts at once, so the engine can batch at most 1,000: "
               "modelled as offline with max_num_seqs 1000"},
    "nim_kv_cache_dtype": {"value": "fp8", "why": "NIM FP8 TensorRT-LLM profiles use an FP8 KV cache"},
    "multi_step_itl": "vLLM 0.6.0 with --num-scheduler-steps N emits tokens in bursts of N, so its "
                      "measured ITL is N decode steps, and a new request waits on average half a "
                      "multi-step run (N/2 steps) before its prefill is scheduled",
    "tgi_time_per_token": "TGI time_per_token = (prefill + decode time) / generated tokens, without queueing",
}


def _precision(weight_dtype: str) -> str:
    w = weight_dtype.lower()
    if w.startswith("fp8") or w.startswith("int8"):
        return "fp8"  # W8A8 FP8; int8 GPTQ is W8A16 = how 8-bit weights run weight-only on Ampere
    if "awq" in w:
        return "int4-awq"
    if w.startswith("int4"):
        return "int4-gptq"
    return w


@dataclass(frozen=True)
class CalRow:
    id: str
    source: str
    metric: str
    value: float
    cfg: ReplicaConfig
    shape: WorkloadShape
    mode: str  # closed | open | offline
    load: float
    multi_step: int


def load_rows(catalog: Catalog, path: Path | str = DEFAULT_CSV) -> list[CalRow]:
    a = BENCHMARK_ASSUMPTIONS
    share = a["sharegpt_mean_tokens"]
    assert isinstance(share, dict)
    out: list[CalRow] = []
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            src = r["id"].split("-")[0]
            engine = ENGINES[r["engine"]]
            kv = "fp8" if "fp8" in r["kv_dtype"] else "auto"
            if src == "nim" and not r["kv_dtype"]:
                kv = str(a["nim_kv_cache_dtype"]["value"])  # type: ignore[index]
            limits: dict[str, int] = {}
            if src in ("trt013", "gpustackq"):
                lim = a[f"{src}_engine_limits"]
                assert isinstance(lim, dict)
                limits = {"max_num_seqs": lim["max_num_seqs"], "max_num_batched_tokens": lim["max_num_batched_tokens"]}
            cfg = ReplicaConfig(model=catalog.model(MODELS[r["model"]]), gpu=r["gpu"],
                                precision=_precision(r["weight_dtype"]), tp=int(r["tp"]), pp=int(r["pp"] or 1),
                                kv_cache_dtype=kv, engine=engine, **limits)
            isl = float(r["isl"]) if r["isl"] else float(share["prompt"])
            osl = float(r["osl"]) if r["osl"] else float(share["output"])
            rate = r["request_rate"]
            if r["concurrency"]:
                mode, load = "closed", float(r["concurrency"])
            elif rate and rate != "inf":
                mode, load = "open", float(rate)
            else:
                mode, load = "offline", 0.0
            m = re.search(r"num-scheduler-steps (\d+)", r["engine_version"])
            out.append(CalRow(r["id"], src, r["metric"], float(r["value"]), cfg, WorkloadShape(isl, osl),
                              mode, load, int(m.group(1)) if m else 1))
    return out


def estimate(catalog: Catalog, row: CalRow) -> LoadEstimate:
    if row.mode == "closed":
        return estimate_closed_loop(catalog, row.cfg, row.shape, int(row.load))
    if row.mode == "open":
        return estimate_open_loop(catalog, row.cfg, row.shape, row.load)
    return estimate_offline(catalog, row.cfg, row.shape)


def metric_group(metric: str) -> str:
    """throughput | ttft | itl | e2e: the groups accuracy.py reports."""
    if metric in ("output_tok_s_total", "output_tok_s_per_gpu", "total_tok_s_total", "requests_s"):
        return "throughput"
    if metric in ("tpot_ms", "itl_ms"):
        return "itl"
    return "ttft" if metric == "ttft_ms" else "e2e"


def predict(catalog: Catalog, row: CalRow) -> float:
    """The model's value for this row's metric (same unit as the row)."""
    e = estimate(catalog, row)
    isl, osl = row.shape.prompt_tokens, row.shape.output_tokens
    itl = e.itl_ms * row.multi_step
    table: dict[str, Callable[[], float]] = {
        "output_tok_s_total": lambda: e.output_tokens_per_s,
        "output_tok_s_per_gpu": lambda: e.output_tokens_per_s / (row.cfg.tp * row.cfg.pp),
        "total_tok_s_total": lambda: e.output_tokens_per_s * (isl + osl) / osl,
        "requests_s": lambda: e.requests_per_s,
        "ttft_ms": lambda: e.ttft_ms + (row.multi_step / 2 * e.itl_ms if row.multi_step > 1 else 0.0),
        "itl_ms": lambda: itl,
        "tpot_ms": lambda: (e.e2e_latency_ms / osl if row.cfg.engine == "tgi" else e.itl_ms),
        "e2e_latency_ms": lambda: e.e2e_latency_ms,
    }
    v = table[row.metric]()
    return v if math.isfinite(v) else 1e12

