"""The workload spec: what a team wants to serve, at what load and latency (pydantic v2).

Units are in the field names: tokens, ms, requests/s. Every default lives here, once.
`sizing.stack.load_stack` reads these from a `stacks/Pulumi.<env>.yaml` file.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Precision = Literal["bf16", "fp16", "fp8", "int8", "int4-awq", "int4-gptq", "fp4"]
PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp8", "int8", "int4-awq", "int4-gptq", "fp4")
KvCacheDtype = Literal["auto", "fp8"]
Strategy = Literal["auto", "scale-up", "scale-out", "mixed"]
Purchase = Literal["on-demand", "spot", "mixed"]
Engine = Literal["vllm", "sglang", "tensorrt-llm"]

# llmcap:workload.weights_source: a Hugging Face id (org/name), or an s3:// URI whose bucket follows
# the S3 user guide's "General purpose bucket naming rules" (3-63 lowercase letters, digits, dots, hyphens)
HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?$")


# C0 controls and DEL (NUL included): never part of a name, id, path or URI, and a NUL makes every OS
# call on a path raise; refused where input enters, in every string of every input model
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


def no_control_chars(v: object) -> object:
    """A string (or the strings in a list or mapping) with no control character, else a ValueError
    naming the first one; other values pass through untouched (pydantic checks their type)."""
    items = v if isinstance(v, list) else [*v.keys(), *v.values()] if isinstance(v, dict) else [v]
    for s in items:
        if isinstance(s, str) and (m := CONTROL_CHARS.search(s)):
            raise ValueError(f"contains the control character {m.group()!r} at position {m.start()}; "
                             "names, ids and paths are plain text")
    return v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    _plain_text = field_validator("*", mode="before")(no_control_chars)


class TokenLength(_Strict):
    """A token count per request: the mean and, optionally, the 95th percentile."""

    mean: int = Field(gt=0, le=10_000_000, description="mean tokens per request")
    p95: int | None = Field(default=None, gt=0, le=10_000_000, description="95th-percentile tokens per request")

    @model_validator(mode="after")
    def _p95_not_below_mean(self) -> TokenLength:
        if self.p95 is not None and self.p95 < self.mean:
            raise ValueError(f"p95 ({self.p95}) must be at least the mean ({self.mean})")
        return self

    @property
    def p95_or_mean(self) -> int:
        return self.p95 or self.mean


def _token_length(v: object) -> object:
    if isinstance(v, bool):
        return v  # let pydantic reject it
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return {"mean": v}
    return v


class Traffic(_Strict):
    """Exactly one of `concurrent_users` or `peak_requests_per_s`.

    `concurrent_users` counts *active* requests (in prefill or decode at the same moment),
    not people with a chat window open. `tokens_per_s_per_user` is the output rate each of
    them expects; by default it is what the ITL target implies (1000 / itl_p95_ms).
    """

    concurrent_users: int | None = Field(default=None, gt=0, le=10_000_000,
                                         description="active requests in flight at peak")
    peak_requests_per_s: float | None = Field(default=None, gt=0, le=1_000_000, allow_inf_nan=False,
                                              description="peak arrival rate, requests/s (Poisson)")
    tokens_per_s_per_user: float | None = Field(default=None, gt=0, le=100_000, allow_inf_nan=False,
                                                description="output tokens/s each active user needs")

    @model_validator(mode="after")
    def _exactly_one(self) -> Traffic:
        if (self.concurrent_users is None) == (self.peak_requests_per_s is None):
            raise ValueError("give exactly one of concurrent_users or peak_requests_per_s")
        return self


SLO_METRICS = ("ttft", "itl", "tpot", "e2e")
SLO_PERCENTILES = ("p50", "p90", "p95", "p99")
_SLO_LIMIT_MS = {"ttft": 3_600_000, "itl": 60_000, "tpot": 60_000, "e2e": 86_400_000}


class PercentileTargets(_Strict):
    """Targets of one latency metric at any of its percentiles, ms (e.g. `{p95: 1000, p99: 2500}`)."""

    p50: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="median, ms")
    p90: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="90th percentile, ms")
    p95: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="95th percentile, ms")
    p99: float | None = Field(default=None, gt=0, allow_inf_nan=False, description="99th percentile, ms")

    @model_validator(mode="after")
    def _some_and_ordered(self) -> PercentileTargets:
        given = [(q, v) for q in SLO_PERCENTILES if (v := getattr(self, q)) is not None]
        if not given:
            raise ValueError("give at least one percentile target: p50, p90, p95 or p99 (ms)")
        for (qa, va), (qb, vb) in zip(given, given[1:], strict=False):
            if va > vb:
                raise ValueError(f"{qa} target ({va:g} ms) is above the {qb} target ({vb:g} ms); "
                                 "a higher percentile cannot be faster")
        return self

    def items(self) -> list[tuple[str, float]]:
        return [(q, float(v)) for q in SLO_PERCENTILES if (v := getattr(self, q)) is not None]


# The targets a workload gets when its stack sets no latency target at all (`slo` absent or empty), ms.
# Once any target is given, exactly the given targets hold: none is added (a batch job may set E2E only).
DEFAULT_SLO_TARGETS: tuple[tuple[str, str, float], ...] = (("ttft", "p95", 1000.0), ("itl", "p95", 50.0))
SLO_LABELS = {"ttft": "TTFT", "itl": "ITL", "tpot": "TPOT", "e2e": "E2E"}


def describe_targets(targets: tuple[tuple[str, str, float], ...]) -> str:
    """One line, e.g. "TTFT p95 ≤ 1000 ms, ITL p99 ≤ 50 ms": the one spelling of a target every output uses."""
    return ", ".join(f"{SLO_LABELS[m]} {q} ≤ {v:g} ms" for m, q, v in targets)


class Slo(_Strict):
    """Latency targets, ms: the one source of truth of what a target is (metric, percentile, value).

    `ttft`, `itl`, `tpot` (time per output token, per request) and `e2e` (end-to-end latency) take
    targets at any percentile, e.g. `ttft: {p95: 1000}`, `itl: {p99: 50}`, `e2e: {p95: 60000}`. The
    original keys `ttft_p95_ms` / `itl_p95_ms` are still read and mean `ttft: {p95: ..}` / `itl: {p95: ..}`
    (giving both spellings with different p95 values is an error). With no target at all the defaults
    DEFAULT_SLO_TARGETS hold; otherwise exactly the targets given, nothing invented. Every reader and
    renderer prints from `targets()` / `describe()`."""

    ttft: PercentileTargets | None = Field(default=None, description="TTFT targets by percentile, ms")
    itl: PercentileTargets | None = Field(default=None, description="ITL targets by percentile, ms")
    tpot: PercentileTargets | None = Field(default=None, description="TPOT targets by percentile, ms")
    e2e: PercentileTargets | None = Field(default=None, description="end-to-end latency targets by percentile, ms")

    @model_validator(mode="before")
    @classmethod
    def _fold_p95_keys(cls, data: object) -> object:
        """`ttft_p95_ms: X` is `ttft: {p95: X}` (itl likewise): one storage, so no reader can see one
        spelling and miss the other; a clash between the two spellings is an error. With no target
        at all, the defaults."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for m in ("ttft", "itl"):
            key = f"{m}_p95_ms"
            if key not in out:
                continue
            v, sub = out.pop(key), out.get(m)
            if sub is None:
                out[m] = {"p95": v}
            elif isinstance(sub, dict):
                if sub.get("p95") is not None and sub["p95"] != v:
                    raise ValueError(f"{key} ({v}) and {m}.p95 ({sub['p95']}) disagree; give one of them")
                out[m] = {**sub, "p95": v}
        if all(out.get(m) is None for m in SLO_METRICS):
            for m, q, v in DEFAULT_SLO_TARGETS:
                out[m] = {**(out.get(m) or {}), q: v}
        return out

    @model_validator(mode="after")
    def _limits(self) -> Slo:
        for m in SLO_METRICS:
            sub = getattr(self, m)
            for q, v in sub.items() if sub else ():
                if v > _SLO_LIMIT_MS[m]:
                    raise ValueError(f"{m}.{q} ({v:g} ms) is above the largest target the planner takes "
                                     f"({_SLO_LIMIT_MS[m]:,} ms)")
        return self

    def targets(self) -> tuple[tuple[str, str, float], ...]:
        """Every (metric, percentile, ms) target that must hold, in SLO_METRICS then percentile order."""
        out: list[tuple[str, str, float]] = []
        for m in SLO_METRICS:
            sub = getattr(self, m)
            out += [(m, q, v) for q, v in sub.items()] if sub else []
        return tuple(out)

    def target_ms(self, metric: str, q: str) -> float | None:
        """The target of one metric at one percentile, ms; None when the user set none."""
        return next((v for m, p, v in self.targets() if (m, p) == (metric, q)), None)

    def bound_ms(self, metric: str, q: str) -> float:
        """As target_ms, with no target meaning no bound (inf): for arithmetic, never for printing."""
        v = self.target_ms(metric, q)
        return math.inf if v is None else v

    @property
    def ttft_p95_ms(self) -> float | None:
        """The TTFT p95 target, ms; None when the user set none."""
        return self.target_ms("ttft", "p95")

    @property
    def itl_p95_ms(self) -> float | None:
        """The ITL p95 target, ms; None when the user set none."""
        return self.target_ms("itl", "p95")

    def per_token_ms(self) -> float | None:
        """The tightest per-token target (ITL or TPOT at any percentile), ms; None without one."""
        vals = [v for m, _, v in self.targets() if m in ("itl", "tpot")]
        return min(vals) if vals else None

    def describe(self) -> str:
        """One line, e.g. "TTFT p95 ≤ 1000 ms, ITL p99 ≤ 50 ms"."""
        return describe_targets(self.targets())


class WorkloadSpec(_Strict):
    """Stack config key `llmcap:workload`."""

    model: str = Field(min_length=1, max_length=500,
                       description="catalog name or Hugging Face id, or a path to a config.json")
    precision: Precision | list[Precision] = Field(
        default="bf16", description="one precision, or the list the user accepts (the planner picks)")
    checkpoints: dict[str, str] = Field(
        default_factory=dict,
        description="pre-quantized Hugging Face checkpoints by precision, e.g. {int4-awq: org/model-AWQ}; "
                    "int4-awq, int4-gptq, int8 and fp4 need one, fp8 quantizes the 16-bit model on load")
    kv_cache_dtype: KvCacheDtype = "auto"
    prompt_tokens: TokenLength
    output_tokens: TokenLength
    traffic: Traffic
    slo: Slo = Field(default_factory=Slo)
    prefix_cache_hit_rate: float = Field(default=0.0, ge=0.0, lt=1.0, allow_inf_nan=False,
                                         description="share of prompt tokens served from the prefix cache")
    max_context_tokens: int | None = Field(default=None, gt=0, le=10_000_000,
                                           description="vLLM --max-model-len; default the model's context limit "
                                                       "within the KV cache, at least prompt p95 + output p95")
    engine: Engine = Field(default="vllm", description="serving engine the performance model assumes")
    weights_source: str | None = Field(
        default=None, min_length=1, max_length=500,
        description="where the weights come from: a Hugging Face id or an s3:// URI; required to render or "
                    "deploy a model given as a local config.json")

    _tl = field_validator("prompt_tokens", "output_tokens", mode="before")(_token_length)

    @field_validator("precision", mode="after")
    @classmethod
    def _nonempty(cls, v: object) -> object:
        if isinstance(v, list):
            if not v:
                raise ValueError("list at least one precision")
            if len(set(v)) != len(v):
                raise ValueError("precisions are listed twice")
        return v

    @field_validator("checkpoints", mode="after")
    @classmethod
    def _checkpoint_ids(cls, v: dict[str, str]) -> dict[str, str]:
        for k, ident in v.items():
            if k not in PRECISIONS:
                raise ValueError(f"checkpoint key {k!r} is not a precision ({', '.join(PRECISIONS)})")
            if not ident.strip() or len(ident) > 500:
                raise ValueError(f"checkpoint for {k} must be a Hugging Face id or a path")
        return v

    @field_validator("weights_source", mode="after")
    @classmethod
    def _weights_source(cls, v: str | None) -> str | None:
        if v is None or HF_ID.match(v) or S3_URI.match(v):
            return v
        raise ValueError(f"{v[:80]!r} is neither a Hugging Face id (org/name) nor an s3://bucket/prefix URI")

    @model_validator(mode="after")
    def _context_fits(self) -> WorkloadSpec:
        need = self.prompt_tokens.p95_or_mean + self.output_tokens.p95_or_mean
        if self.max_context_tokens is not None and self.max_context_tokens < need:
            raise ValueError(f"max_context_tokens ({self.max_context_tokens}) is below prompt p95 + output p95 "
                             f"({need}); raise it or shorten the requests")
        return self

    @property
    def precisions(self) -> list[str]:
        return list(self.precision) if isinstance(self.precision, list) else [self.precision]

    @property
    def context_tokens(self) -> int:
        """The longest sequence a replica must hold (tokens); --max-model-len is at least this
        (sizing/planning/builder.py served_max_model_len)."""
        return self.max_context_tokens or (self.prompt_tokens.p95_or_mean + self.output_tokens.p95_or_mean)

    def _implied_tokens_per_s_per_user(self) -> float | None:
        """What the SLO implies per active request, output tokens/s: 1000 / the tightest ITL or TPOT
        target, else the output mean over the tightest E2E target; None when it implies no rate."""
        per_token = self.slo.per_token_ms()
        if per_token is not None:
            return 1000.0 / per_token
        e2e = [v for m, _, v in self.slo.targets() if m == "e2e"]
        return self.output_tokens.mean * 1000.0 / min(e2e) if e2e else None

    @model_validator(mode="after")
    def _rate_known(self) -> WorkloadSpec:
        if self.traffic.concurrent_users is not None and self.traffic.tokens_per_s_per_user is None \
                and self._implied_tokens_per_s_per_user() is None:
            raise ValueError("with concurrent_users and only a TTFT target, give traffic.tokens_per_s_per_user "
                             "(output tokens/s each user needs) or an ITL, TPOT or E2E target")
        return self

    @property
    def tokens_per_s_per_user(self) -> float | None:
        """Output tokens/s per active request: given, else what the SLO implies (1000 / the tightest
        ITL or TPOT target, or output mean / the tightest E2E target); None only for a rate-driven
        workload whose SLO implies none (its demand is requests/s × output tokens)."""
        return self.traffic.tokens_per_s_per_user or self._implied_tokens_per_s_per_user()


class HardwareSpec(_Strict):
    """Stack config key `llmcap:hardware`."""

    strategy: Strategy = "auto"
    gpus: list[str] | None = Field(default=None, description="allowed GPU names; default every GPU in the region")
    instance_types: list[str] | None = Field(default=None, description="allowed instance types; default all")
    purchase: Purchase = "on-demand"
    redundancy: int = Field(default=1, ge=0, le=1000, description="extra replicas beyond demand (failover, updates)")
    autoscaling_headroom: float = Field(default=0.5, ge=0, le=10, allow_inf_nan=False,
                                        description="node-group max = desired × (1 + headroom), rounded up")
    spot_on_demand_floor: float = Field(default=0.5, ge=0, le=1, allow_inf_nan=False,
                                        description="with purchase=mixed: share of replicas kept on-demand")

    @field_validator("gpus", "instance_types")
    @classmethod
    def _nonempty_list(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not v:
            raise ValueError("list at least one, or leave the key out to allow all")
        return v
