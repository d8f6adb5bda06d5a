"""The figures of `llmcap estimate`, shared by its flags and its `--batch FILE.jsonl` sweep: one
`EstimateQuery` (validated once, whichever way it came), then memory (`memory_figures`), throughput
and latency at a load and goodput at an SLO (`perf_figures`, from sizing.perf.load and, on request,
the step-level simulation sizing.perf.sim).

Units: ms for latencies, tokens/s and requests/s for the whole replica. Infinite values (an open
loop rate beyond capacity) are written as null in JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from sizing.catalog.lookup import Catalog
from sizing.errors import LlmcapError, SpecError
from sizing.perf.binding import binding
from sizing.perf.goodput import goodput
from sizing.perf.load import LoadEstimate, WorkloadShape, estimate_closed_loop, estimate_offline, estimate_open_loop
from sizing.perf.memory import GIB, memory_fit
from sizing.perf.replica import ReplicaConfig
from sizing.spec import PRECISIONS

ENGINES = ("vllm", "sglang", "tensorrt-llm")
KV_CACHE_DTYPES = ("auto", "fp8")
MAX_ENGINE_LIMIT = 1_000_000  # the largest --max-num-seqs / --max-num-batched-tokens accepted
JSONL_REQUIRED = ("model", "gpu", "prompt_tokens", "output_tokens")

# the checks that involve two fields: their text, with each field named as the caller names it
_CROSS = {
    "both_loads": ("give one of {concurrency} and {rate}, not both", ("concurrency", "rate")),
    "no_output_tokens": ("{output_tokens}: the performance model needs at least 1 output token", ("output_tokens",)),
}


def _at_least(lo: int) -> Callable[[int], int]:
    def check(v: int) -> int:
        if v < lo:
            raise ValueError(f"must be at least {lo} (got {v})")
        return v
    return check


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    def check(v: str) -> str:
        if v not in choices:
            raise ValueError(f"{v!r} is not one of {', '.join(choices)}")
        return v
    return check


class EstimateQuery(BaseModel):
    """One `llmcap estimate` question about one replica, from its flags or one line of a `--batch` file.

    Field names are the JSONL keys; each flag is the key with dashes (`kv_cache_dtype` is
    `--kv-cache-dtype`). Every rule is checked here once, for both; an error names the field the way
    its caller wrote it (`where`). The split of the attention heads over `tp` needs the model and is
    checked by `memory_figures`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str  # a catalog name, Hugging Face id or path to a config.json
    gpu: str
    tp: int = 1  # tensor-parallel GPUs per replica
    pp: int = 1  # pipeline-parallel stages per replica
    precision: str = "bf16"
    kv_cache_dtype: str = "auto"
    engine: str = "vllm"
    prompt_tokens: int  # per request
    output_tokens: int  # per request; 0: memory figures only
    concurrency: int | Literal["max"] | None = None  # requests in flight (closed loop), "max": the largest batch
    rate: float | None = None  # Poisson arrivals, requests/s (open loop)
    ttft_p95_ms: float | None = None  # the SLO of the goodput figures
    itl_p95_ms: float | None = None
    simulate: bool = False  # also the step-level simulation at the same load (sim_* keys)
    max_num_batched_tokens: int | None = None  # vLLM's limits (None: the engine's defaults)
    max_num_seqs: int | None = None
    _line: int | None = PrivateAttr(default=None)  # the JSONL line it came from (None: flags)

    _tp = field_validator("tp", "pp", "prompt_tokens")(_at_least(1))
    _output = field_validator("output_tokens")(_at_least(0))
    _precision = field_validator("precision")(_one_of(PRECISIONS))
    _kv = field_validator("kv_cache_dtype")(_one_of(KV_CACHE_DTYPES))
    _engine = field_validator("engine")(_one_of(ENGINES))

    @field_validator("tp", "pp", "prompt_tokens", "output_tokens", "max_num_batched_tokens", "max_num_seqs", "rate",
                     "ttft_p95_ms", "itl_p95_ms", mode="before")
    @classmethod
    def _not_a_bool(cls, v: Any) -> Any:
        if isinstance(v, bool):  # JSON true is not 1
            raise ValueError(f"must be a number (got {v!r})")
        return v

    @field_validator("concurrency", mode="before")
    @classmethod
    def _concurrency(cls, v: Any) -> int | str | None:
        if v is None or v == "max":
            return v
        whole = isinstance(v, int | str) and not isinstance(v, bool) and str(v).strip().lstrip("-").isdigit()
        if not (whole or (isinstance(v, float) and v.is_integer())):
            raise ValueError(f"{v!r} is not a whole number or 'max'")
        n = int(v)
        if n < 1:
            raise ValueError(f"must be at least 1 (got {n})")
        return n

    @field_validator("rate")
    @classmethod
    def _rate(cls, v: float | None) -> float | None:
        if v is not None and not (v > 0 and math.isfinite(v)):
            raise ValueError(f"must be a positive number of requests/s (got {v})")
        return v

    @field_validator("ttft_p95_ms", "itl_p95_ms")
    @classmethod
    def _positive(cls, v: float | None) -> float | None:
        if v is not None and not v > 0:
            raise ValueError(f"must be positive (got {v})")
        return v

    @field_validator("max_num_batched_tokens", "max_num_seqs")
    @classmethod
    def _engine_limit(cls, v: int | None) -> int | None:
        if v is not None and not 1 <= v <= MAX_ENGINE_LIMIT:
            raise ValueError(f"must be a whole number from 1 to {MAX_ENGINE_LIMIT:,} (got {v})")
        return v

    @model_validator(mode="after")
    def _one_load(self) -> EstimateQuery:
        if self.concurrency is not None and self.rate is not None:
            raise PydanticCustomError("both_loads", _CROSS["both_loads"][0],
                                      {"concurrency": "concurrency", "rate": "rate"})
        if self.output_tokens < 1 and self.asks_for_load:
            raise PydanticCustomError("no_output_tokens", _CROSS["no_output_tokens"][0],
                                      {"output_tokens": "output_tokens"})
        return self

    @property
    def asks_for_load(self) -> bool:
        """Whether a load or an SLO is given (they need the performance model)."""
        return any(v is not None for v in (self.concurrency, self.rate, self.ttft_p95_ms, self.itl_p95_ms))

    @classmethod
    def from_flags(cls, **flags: Any) -> EstimateQuery:
        """From the `llmcap estimate` flags; an error names the flag (`--tp: ...`)."""
        return cls._parse(flags, None)

    @classmethod
    def from_jsonl(cls, obj: Any, line: int) -> EstimateQuery:
        """From one JSON value of a `--batch` file; an error names the line and the key (`line 3: tp: ...`)."""
        if not isinstance(obj, dict):
            raise SpecError(f"line {line}: expected a JSON object")
        return cls._parse(obj, line)

    @classmethod
    def _parse(cls, data: dict[str, Any], line: int | None) -> EstimateQuery:
        try:
            q = cls.model_validate(data)
        except ValidationError as e:
            raise SpecError("; ".join(_problem(err, line) for err in e.errors())) from None
        q._line = line
        return q

    def where(self, field: str) -> str:
        """How this query's caller names a field: `--kv-cache-dtype`, or `line 3: kv_cache_dtype`."""
        return _where(field, self._line)


def _where(field: str, line: int | None) -> str:
    return "--" + field.replace("_", "-") if line is None else f"line {line}: {field}"


def _problem(err: Any, line: int | None) -> str:
    """One pydantic error as one line naming the field (or, for a two-field rule, both)."""
    kind, loc, got = err["type"], err["loc"], err.get("input")
    if kind in _CROSS:
        text, fields = _CROSS[kind]
        msg = text.format(**{f: _where(f, None) if line is None else f for f in fields})
        return msg if line is None else f"line {line}: {msg}"
    field = str(loc[0]) if loc else "?"
    if kind == "value_error":
        msg = str(err["ctx"]["error"])
    elif kind == "missing":
        msg = "missing" + (f" (every line needs {', '.join(JSONL_REQUIRED)})" if line is not None else "")
    elif kind == "extra_forbidden":
        msg = f"unknown key; use one of {', '.join(EstimateQuery.model_fields)}"
    elif kind.startswith("int_"):
        msg = f"must be a whole number (got {got!r})"
    elif kind.startswith("float_"):
        msg = f"must be a number (got {got!r})"
    elif kind.startswith("bool_"):
        msg = f"must be true or false (got {got!r})"
    elif kind.startswith("string_"):
        msg = f"must be a string (got {got!r})"
    else:
        msg = str(err["msg"])
    return f"{_where(field, line)}: {msg}"


def memory_figures(cat: Catalog, q: EstimateQuery) -> dict[str, Any]:
    """The memory keys of `llmcap estimate --format json` (replica-wide unless named per GPU)."""
    m = cat.model(q.model)
    g = cat.gpu(q.gpu)
    if m.num_attention_heads % q.tp:
        ok = ", ".join(str(t) for t in (1, 2, 4, 8) if m.num_attention_heads % t == 0)
        raise SpecError(f"{q.where('tp')}: {m.num_attention_heads} attention heads of {m.hf_id} do not split over "
                        f"{q.tp} GPUs; use one of {ok}")
    fit = memory_fit(cat, ReplicaConfig(model=m, gpu=g.name, precision=q.precision, tp=q.tp, pp=q.pp,
                                        kv_cache_dtype=q.kv_cache_dtype, engine=q.engine),
                     q.prompt_tokens + q.output_tokens)
    return {
        "model": m.hf_id, "gpu": g.name, "tp": q.tp, "pp": q.pp, "precision": q.precision,
        "kv_cache_dtype": q.kv_cache_dtype, "engine": q.engine,
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


def _num(v: float) -> float | None:
    """Rounded to 3 decimals; None (JSON null) when infinite."""
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


def perf_figures(cat: Catalog, q: EstimateQuery) -> dict[str, Any]:
    """Load keys of `llmcap estimate --format json`. No load and no SLO: the largest batch
    (offline). An SLO without a load: the figures at the goodput point. `q.simulate`: also the
    step-level simulation's percentiles at the same load (`sim_*` keys; sizing/perf/sim.py).
    No output tokens: a memory-only question, no load figures."""
    if q.output_tokens < 1:
        return {}
    cfg = ReplicaConfig(model=cat.model(q.model), gpu=cat.gpu(q.gpu).name, precision=q.precision, tp=q.tp, pp=q.pp,
                        kv_cache_dtype=q.kv_cache_dtype, engine=q.engine, max_num_seqs=q.max_num_seqs,
                        max_num_batched_tokens=q.max_num_batched_tokens)
    shape = WorkloadShape(prompt_tokens=float(q.prompt_tokens), output_tokens=float(q.output_tokens))
    closed_n = q.concurrency if isinstance(q.concurrency, int) else None  # requests in flight, closed loop
    out: dict[str, Any] = {}
    if q.ttft_p95_ms is not None or q.itl_p95_ms is not None:
        ttft_ms = q.ttft_p95_ms if q.ttft_p95_ms is not None else math.inf
        itl_ms = q.itl_p95_ms if q.itl_p95_ms is not None else math.inf
        mode = "open" if q.rate is not None else "closed"
        g = goodput(cat, cfg, shape, ttft_ms, itl_ms, mode=mode)
        out.update({"goodput_output_tokens_per_s": round(g.output_tokens_per_s, 3),
                    "goodput_requests_per_s": round(g.requests_per_s, 4),
                    "goodput_concurrency": round(g.concurrency, 3), "goodput_feasible": g.feasible,
                    "goodput_reason": g.reason})
        given = (("ttft", "p95", q.ttft_p95_ms), ("itl", "p95", q.itl_p95_ms))
        b = binding(cat, cfg, shape, g, tuple((m, p, v) for m, p, v in given if v is not None), mode)
        out.update({"binding": b.code, "binds": b.text})
        if q.concurrency is None and q.rate is None and g.at is not None:
            sim = _sim_keys(cat, cfg, shape, g.at, "closed", g.concurrency, g.requests_per_s) if q.simulate else {}
            return {**load_keys(g.at), **out, **sim}
    if q.rate is not None:
        e = estimate_open_loop(cat, cfg, shape, q.rate)
    elif closed_n is not None:
        e = estimate_closed_loop(cat, cfg, shape, closed_n)
    else:
        e = estimate_offline(cat, cfg, shape)
    mode = "open" if q.rate is not None else "closed" if closed_n is not None else "burst"
    sim = _sim_keys(cat, cfg, shape, e, mode, closed_n, q.rate) if q.simulate else {}
    return {**load_keys(e), **out, **sim}


def _sim_keys(cat: Catalog, cfg: ReplicaConfig, shape: WorkloadShape, e: LoadEstimate, mode: str,
              concurrency: float | None, rate: float | None) -> dict[str, Any]:
    """The step-level simulation at the same load: closed loop of `concurrency`, Poisson at `rate`
    (requests/s), or (burst: offline) twice the largest batch at once; fixed lengths, seed 0.
    Percentiles in ms, throughput per replica."""
    from sizing.perf.sim import MAX_REQUESTS, Arrivals, Lengths, simulate

    if e.max_concurrent_sequences < 1:
        return {}
    arr = (Arrivals.closed(max(1, int(concurrency or 1))) if mode == "closed" else Arrivals.poisson(rate or 0.0)
           if mode == "open" else Arrivals.burst(min(2 * e.max_concurrent_sequences, MAX_REQUESTS)))
    r = simulate(cat, cfg, Lengths(shape.prompt_tokens), Lengths(shape.output_tokens), arr, seed=0)
    keys: dict[str, Any] = {"sim_arrivals": f"{arr.kind} {arr.value:g}", "sim_requests": r.requests,
                            "sim_output_tokens_per_s": _num(r.output_tokens_per_s),
                            "sim_requests_per_s": _num(r.requests_per_s), "sim_preemptions": r.preemptions,
                            "sim_mean_running": _num(r.mean_running)}
    for m in ("ttft", "itl", "tpot", "e2e"):
        for pct in ("p50", "p90", "p95", "p99"):
            keys[f"sim_{m}_{pct}_ms"] = _num(r.percentile(m, pct))
    return keys


def figures(cat: Catalog, q: EstimateQuery) -> dict[str, Any]:
    """Every key of `llmcap estimate --format json` for one query: memory, then load."""
    return {**memory_figures(cat, q), **perf_figures(cat, q)}


def batch_lines(path: Path, cat: Catalog) -> list[dict[str, Any]]:
    """One result per non-empty line of a JSONL file, in order; {"error": "line N: ..."} where a query fails."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"--batch: cannot read {str(path)!r}: {e.strerror}") from None
    results: list[dict[str, Any]] = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise SpecError(f"line {i}: not JSON: {e}") from None
            results.append(figures(cat, EstimateQuery.from_jsonl(obj, i)))
        except LlmcapError as e:
            msg = "; ".join(e.problems)
            results.append({"error": msg if msg.startswith(f"line {i}: ") else f"line {i}: {msg}"})
        except (ValueError, TypeError, KeyError, OverflowError) as e:
            results.append({"error": f"line {i}: {type(e).__name__}: {e}"})
    return results
