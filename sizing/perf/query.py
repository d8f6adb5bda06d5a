"""The figures of `llmcap estimate`, shared by its flags and its `--batch FILE.jsonl` sweep: memory
(`memory_figures`), throughput and latency at a load and goodput at an SLO (`perf_figures`, from
sizing.perf.load and, on request, the step-level simulation sizing.perf.sim).

Units: ms for latencies, tokens/s and requests/s for the whole replica. Infinite values (an open
loop rate beyond capacity) are written as null in JSON.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from sizing.catalog.lookup import Catalog, load_catalog
from sizing.errors import LlmcapError, SpecError
from sizing.perf.binding import binding
from sizing.perf.goodput import goodput
from sizing.perf.load import (
    LoadEstimate,
    ReplicaConfig,
    WorkloadShape,
    estimate_closed_loop,
    estimate_offline,
    estimate_open_loop,
)
from sizing.perf.memory import GIB, memory_fit
from sizing.spec import PRECISIONS


def memory_figures(model: str, gpu: str, tp: int, pp: int, precision: str, kv_cache_dtype: str,
                   prompt_tokens: int, output_tokens: int, engine: str = "vllm",
                   catalog: Path | None = None) -> dict[str, Any]:
    """The memory keys of `llmcap estimate --format json` (replica-wide unless named per GPU)."""
    if precision not in PRECISIONS:
        raise SpecError(f"--precision: {precision!r} is not one of {', '.join(PRECISIONS)}")
    if kv_cache_dtype not in ("auto", "fp8"):
        raise SpecError(f"--kv-cache-dtype: {kv_cache_dtype!r} is not one of auto, fp8")
    for name, v, lo in (("--tp", tp, 1), ("--pp", pp, 1), ("--prompt-tokens", prompt_tokens, 1),
                        ("--output-tokens", output_tokens, 0)):
        if v < lo:
            raise SpecError(f"{name}: must be at least {lo} (got {v})")
    cat = load_catalog(catalog)
    m = cat.model(model)
    g = cat.gpu(gpu)
    if m.num_attention_heads % tp:
        ok = ", ".join(str(t) for t in (1, 2, 4, 8) if m.num_attention_heads % t == 0)
        raise SpecError(f"--tp: {m.num_attention_heads} attention heads of {m.hf_id} do not split over {tp} GPUs; "
                        f"use one of {ok}")
    fit = memory_fit(cat, m, g.name, precision, tp, pp, prompt_tokens + output_tokens, kv_cache_dtype, engine)
    return {
        "model": m.hf_id, "gpu": g.name, "tp": tp, "pp": pp, "precision": precision,
        "kv_cache_dtype": kv_cache_dtype, "engine": engine,
        "weights_gib": round(fit.weights_gib, 3),
        "weights_gib_per_gpu": round(fit.weights_gib_per_gpu, 3),
        "kv_cache_bytes_per_token": int(round(fit.kv_cache_bytes_per_token)),
        "kv_cache_gib_per_sequence": round(fit.kv_cache_bytes_per_sequence / GIB, 4),
        "kv_cache_gib_available": round(fit.kv_cache_gib_available, 3),
        "kv_cache_gib_per_gpu": round(fit.kv_cache_gib_per_gpu, 3),
        "overhead_gib_per_gpu": round(fit.overhead_gib_per_gpu, 3),
        "gpu_memory_gib_per_gpu": round(fit.gpu_memory_gib_per_gpu, 3),
        "gpu_memory_utilization": fit.gpu_memory_utilization,
        "context_tokens": fit.context_tokens,
        "max_concurrent_sequences": fit.max_concurrent_sequences,
        "fits": fit.fits,
        "fit_reason": fit.reason,
    }


ENGINES = ("vllm", "sglang", "tensorrt-llm")


def _num(v: float) -> float | None:
    return round(v, 3) if math.isfinite(v) else None


def load_keys(e: LoadEstimate) -> dict[str, Any]:
    return {
        "concurrency": _num(e.concurrency), "requests_per_s": _num(e.requests_per_s),
        "output_tokens_per_s": _num(e.output_tokens_per_s), "ttft_ms": _num(e.ttft_ms),
        "ttft_p95_ms": _num(e.ttft_p95_ms), "itl_ms": _num(e.itl_ms), "itl_p95_ms": _num(e.itl_p95_ms),
        "e2e_latency_ms": _num(e.e2e_latency_ms), "decode_step_ms": _num(e.decode_step_ms),
        "max_batch_sequences": e.max_concurrent_sequences, "stable": e.stable, "bound": e.bound,
        "why": e.explanation,
    }


def parse_concurrency(v: str | int | None) -> int | str | None:
    """An int ≥ 1, "max" (the engine's largest batch: offline), or None."""
    if v is None or v == "max":
        return v
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise SpecError(f"--concurrency: {v!r} is not a whole number or 'max'") from None
    if n < 1:
        raise SpecError(f"--concurrency: must be at least 1 (got {n})")
    return n


def perf_figures(cat: Catalog, model: str, gpu: str, tp: int, pp: int, precision: str, kv_cache_dtype: str,
                 engine: str, prompt_tokens: int, output_tokens: int, concurrency: str | int | None = None,
                 rate: float | None = None, ttft_p95_ms: float | None = None,
                 itl_p95_ms: float | None = None, simulate: bool = False,
                 max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None) -> dict[str, Any]:
    """Load keys of `llmcap estimate --format json`. No load and no SLO: the largest batch
    (offline). An SLO without a load: the figures at the goodput point. `simulate`: also the
    step-level simulation's percentiles at the same load (`sim_*` keys; sizing/perf/sim.py)."""
    for flag, lim in (("--max-num-batched-tokens", max_num_batched_tokens), ("--max-num-seqs", max_num_seqs)):
        if lim is not None and not 1 <= lim <= 1_000_000:
            raise SpecError(f"{flag}: must be a whole number from 1 to 1,000,000 (got {lim})")
    if engine not in ENGINES:
        raise SpecError(f"--engine: {engine!r} is not one of {', '.join(ENGINES)}")
    if concurrency is not None and rate is not None:
        raise SpecError("give one of --concurrency and --rate, not both")
    if rate is not None and not (rate > 0 and math.isfinite(rate)):
        raise SpecError(f"--rate: must be a positive number of requests/s (got {rate})")
    n = parse_concurrency(concurrency)
    if output_tokens < 1:  # a memory-only question (e.g. prefill capacity): no load figures
        if n is not None or rate is not None or ttft_p95_ms is not None or itl_p95_ms is not None:
            raise SpecError("--output-tokens: the performance model needs at least 1 output token")
        return {}
    cfg = ReplicaConfig(model=cat.model(model), gpu=cat.gpu(gpu).name, precision=precision, tp=tp, pp=pp,
                        kv_cache_dtype=kv_cache_dtype, engine=engine, max_num_seqs=max_num_seqs,
                        max_num_batched_tokens=max_num_batched_tokens)
    shape = WorkloadShape(prompt_tokens=float(prompt_tokens), output_tokens=float(output_tokens))
    out: dict[str, Any] = {}
    slo = ttft_p95_ms is not None or itl_p95_ms is not None
    if slo:
        for name, v in (("--ttft-p95-ms", ttft_p95_ms), ("--itl-p95-ms", itl_p95_ms)):
            if v is not None and not v > 0:
                raise SpecError(f"{name}: must be positive (got {v})")
        g = goodput(cat, cfg, shape, ttft_p95_ms if ttft_p95_ms is not None else math.inf,
                    itl_p95_ms if itl_p95_ms is not None else math.inf, mode="open" if rate is not None else "closed")
        out.update({"goodput_output_tokens_per_s": round(g.output_tokens_per_s, 3),
                    "goodput_requests_per_s": round(g.requests_per_s, 4),
                    "goodput_concurrency": round(g.concurrency, 3), "goodput_feasible": g.feasible,
                    "goodput_reason": g.reason})
        b = binding(cat, cfg, shape, g, ttft_p95_ms if ttft_p95_ms is not None else math.inf,
                    itl_p95_ms if itl_p95_ms is not None else math.inf, "open" if rate is not None else "closed")
        out.update({"binding": b.code, "binds": b.text})
        if n is None and rate is None and g.at is not None:
            mode = "open" if rate is not None else "closed"
            sim = _sim_keys(cat, cfg, shape, g.at, mode, g.concurrency, g.requests_per_s) if simulate else {}
            return {**load_keys(g.at), **out, **sim}
    if rate is not None:
        e = estimate_open_loop(cat, cfg, shape, rate)
    elif isinstance(n, int):
        e = estimate_closed_loop(cat, cfg, shape, n)
    else:
        e = estimate_offline(cat, cfg, shape)
    sim = _sim_keys(cat, cfg, shape, e, "open" if rate is not None else "closed" if isinstance(n, int) else "burst",
                    n if isinstance(n, int) else None, rate) if simulate else {}
    return {**load_keys(e), **out, **sim}


def _sim_keys(cat: Catalog, cfg: ReplicaConfig, shape: WorkloadShape, e: LoadEstimate, mode: str,
              n: float | None, rate: float | None) -> dict[str, Any]:
    """The step-level simulation at the same load: closed loop of n, Poisson at rate, or (offline) a
    burst of twice the largest batch; fixed lengths, seed 0. Percentiles in ms, throughput per replica."""
    from sizing.perf.sim import MAX_REQUESTS, Arrivals, Lengths, simulate

    if e.max_concurrent_sequences < 1:
        return {}
    arr = (Arrivals.closed(max(1, int(n or 1))) if mode == "closed" else Arrivals.poisson(rate or 0.0)
           if mode == "open" else Arrivals.burst(min(2 * e.max_concurrent_sequences, MAX_REQUESTS)))
    r = simulate(cat, cfg, Lengths(shape.prompt_tokens), Lengths(shape.output_tokens), arr, seed=0)
    keys: dict[str, Any] = {"sim_arrivals": f"{arr.kind} {arr.value:g}", "sim_requests": r.requests,
                            "sim_output_tokens_per_s": _num(r.output_tokens_per_s),
                            "sim_requests_per_s": _num(r.requests_per_s), "sim_preemptions": r.preemptions,
                            "sim_mean_running": _num(r.mean_running)}
    for m in ("ttft", "itl", "tpot", "e2e"):
        for q in ("p50", "p90", "p95", "p99"):
            keys[f"sim_{m}_{q}_ms"] = _num(r.percentile(m, q))
    return keys


_QUERY_KEYS = {"model", "gpu", "tp", "pp", "precision", "kv_cache_dtype", "engine", "prompt_tokens",
               "output_tokens", "concurrency", "rate", "ttft_p95_ms", "itl_p95_ms", "simulate",
               "max_num_batched_tokens", "max_num_seqs"}


def batch_lines(path: Path, catalog: Path | None = None) -> list[dict[str, Any]]:
    """One result per non-empty line of a JSONL file, in order; {"error": ...} where a query fails."""

    cat = load_catalog(catalog)
    results: list[dict[str, Any]] = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"--batch: cannot read {str(path)!r}: {e.strerror}") from None
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
            if not isinstance(q, dict):
                raise SpecError(f"line {i}: expected a JSON object")
            unknown = sorted(set(q) - _QUERY_KEYS)
            if unknown:
                raise SpecError(f"line {i}: unknown keys {', '.join(unknown)}")
            for k in ("model", "gpu", "prompt_tokens", "output_tokens"):
                if k not in q:
                    raise SpecError(f"line {i}: missing {k!r}")
            args = dict(model=str(q["model"]), gpu=str(q["gpu"]), tp=int(q.get("tp", 1)), pp=int(q.get("pp", 1)),
                        precision=str(q.get("precision", "bf16")), kv_cache_dtype=str(q.get("kv_cache_dtype", "auto")),
                        prompt_tokens=int(q["prompt_tokens"]), output_tokens=int(q["output_tokens"]))
            engine = str(q.get("engine", "vllm"))
            mem = memory_figures(**args, engine=engine, catalog=catalog)  # type: ignore[arg-type]
            rate = q.get("rate")
            load = perf_figures(cat, engine=engine, concurrency=q.get("concurrency"),
                                rate=float(rate) if rate is not None else None,
                                ttft_p95_ms=q.get("ttft_p95_ms"), itl_p95_ms=q.get("itl_p95_ms"),
                                simulate=bool(q.get("simulate", False)),
                                max_num_batched_tokens=q.get("max_num_batched_tokens"),
                                max_num_seqs=q.get("max_num_seqs"), **args)  # type: ignore[arg-type]
            results.append({**mem, **load})
        except LlmcapError as e:
            results.append({"error": "; ".join(e.problems)})
        except (ValueError, TypeError, KeyError, OverflowError) as e:
            results.append({"error": f"line {i}: {type(e).__name__}: {e}"})
    return results
