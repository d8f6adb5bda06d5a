"""The workload spec: what a team wants to serve, at what load and latency (pydantic v2).

Units are in the field names: tokens, ms, requests/s. Every default lives here, once.
`sizing.stack.load_stack` reads these from a `stacks/Pulumi.<env>.yaml` file.
"""

from __future__ import annotations

import math
import re
from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

Precision = Literal["bf16", "fp16", "fp8", "int8", "int4-awq", "int4-gptq", "fp4"]
PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp8", "int8", "int4-awq", "int4-gptq", "fp4")
KvCacheDtype = Literal["auto", "fp8"]
Strategy = Literal["auto", "scale-up", "scale-out", "mixed"]
Purchase = Literal["on-demand", "spot", "mixed"]
# the rate the on-demand instances beyond any reservation are paid at (a billing discount: the node
# group still launches on-demand capacity); sizing/planning/purchase.py prices each from prices.csv
Commitment = Literal["none", "reserved-1yr", "reserved-3yr", "savings-plan-1yr", "savings-plan-3yr"]
CapacityKind = Literal["reservation", "capacity-block"]
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


TraceFormat = Literal["auto", "azure2023", "mooncake", "csv", "jsonl"]
Routing = Literal["round-robin", "least-loaded", "prefix-aware"]


class TraceSpec(_Strict):
    """`llmcap:workload.trace`: a recorded request trace to plan from (sizing/traffic/reader.py has the
    formats; docs/traces.md). A plain string is the path. Relative paths are from the stack file."""

    path: str = Field(min_length=1, max_length=1000, description="the trace file")
    format: TraceFormat = Field(default="auto",
                                description="azure2023 | mooncake | csv | jsonl; auto by its first line")
    time_scale: float = Field(default=1.0, gt=0, le=1000, allow_inf_nan=False,
                              description="replay this many times faster (2 = twice the traffic)")
    prefix_reuse: bool = Field(default=True,
                               description="false ignores the trace's prefix ids (what the cache is worth)")
    prefix_block_tokens: int = Field(default=512, gt=0, le=1_000_000,
                                     description="tokens per prefix id in a generic csv/jsonl trace (Mooncake: 512)")
    routing: Routing | None = Field(default=None, description="the router's policy; default prefix-aware when the "
                                                              "trace has prefix ids, else least-loaded")


class BatchJob(_Strict):
    """A batch class: `requests` requests to finish within `deadline_hours`, no latency target."""

    requests: int = Field(gt=0, le=1_000_000_000, description="requests to finish")
    deadline_hours: float = Field(gt=0, le=24 * 366, allow_inf_nan=False, description="finish within, hours")


class RequestClass(_Strict):
    """One entry of `llmcap:workload.classes`: a request type with its own lengths and targets, and either
    a `share` of the workload's `traffic`, its own `traffic` (a request rate), or a `batch` job."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    prompt_tokens: TokenLength
    output_tokens: TokenLength
    slo: Slo = Field(default_factory=Slo)
    share: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False,
                                description="share of the workload's requests (0..1)")
    traffic: Traffic | None = Field(default=None, description="this class's own peak_requests_per_s")
    batch: BatchJob | None = Field(default=None, description="a batch job: requests by a deadline")

    _tl = field_validator("prompt_tokens", "output_tokens", mode="before")(_token_length)

    @model_validator(mode="after")
    def _one_load(self) -> RequestClass:
        given = [k for k in ("share", "traffic", "batch") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"class {self.name}: give exactly one of share, traffic or batch")
        if self.traffic is not None and self.traffic.peak_requests_per_s is None:
            raise ValueError(f"class {self.name}: a class's own traffic is a rate (peak_requests_per_s)")
        return self

    @property
    def is_batch(self) -> bool:
        return self.batch is not None


def _tightest_slo(classes: list[RequestClass]) -> Slo:
    """The analytic pre-search's targets for a mix: each (metric, percentile) target at its tightest value
    over the classes that set it (Slo.targets(), the one source of what a target is)."""
    tight: dict[str, dict[str, float]] = {}
    for c in classes:
        for m, q, v in c.slo.targets():
            by_q = tight.setdefault(m, {})
            by_q[q] = min(v, by_q.get(q, v))
    return Slo.model_validate(tight)


def _merge_classes(data: dict[str, object]) -> dict[str, object]:
    """With `classes`, the top-level prompt_tokens, output_tokens, traffic and slo are derived when missing:
    lengths weighted by each class's requests (p95: the largest class p95), the tightest targets, and
    the total rate. A batch class counts at requests ÷ deadline. The per-class plan checks each class.

    A top-level `slo` given beside `classes` is the default of every class that sets no `slo` of its own
    (a class's own targets replace it whole, nothing merged); the top-level `slo` the planner then reads
    is the tightest over the classes as they will be judged, so it is never looser than a class's."""
    raw = data.get("classes")
    if not isinstance(raw, list) or not raw:
        return data
    top = data.get("traffic")
    top_slo = data.get("slo")
    try:
        if top_slo is not None:
            default = top_slo if isinstance(top_slo, Slo) else Slo.model_validate(top_slo)
            raw = [c.model_copy(update={"slo": default}) if isinstance(c, RequestClass)
                   and "slo" not in c.model_fields_set else
                   ({**c, "slo": default} if isinstance(c, dict) and "slo" not in c else c) for c in raw]
        classes = [c if isinstance(c, RequestClass) else RequestClass.model_validate(c) for c in raw]
        top_t = top if isinstance(top, Traffic) else (Traffic.model_validate(top) if isinstance(top, dict) else None)
    except ValidationError:  # the fields' own validation reports it, with their names
        return data
    rates = []
    for c in classes:
        if c.batch is not None:
            rates.append(c.batch.requests / (c.batch.deadline_hours * 3600.0))
        elif c.traffic is not None:
            rates.append(float(c.traffic.peak_requests_per_s or 0.0))
        elif top_t is not None and top_t.peak_requests_per_s is not None:
            rates.append(float(c.share or 0.0) * top_t.peak_requests_per_s)
        else:
            rates.append(float(c.share or 0.0))  # shares of a concurrency: weights only
    total = sum(rates) or 1.0
    out = dict(data)

    def mean_of(key: str) -> dict[str, int]:
        lens = [getattr(c, key) for c in classes]
        m = sum(r * t.mean for r, t in zip(rates, lens, strict=True)) / total
        return {"mean": max(1, round(m)), "p95": max(max(t.p95_or_mean for t in lens), max(1, round(m)))}

    out.setdefault("prompt_tokens", mean_of("prompt_tokens"))
    out.setdefault("output_tokens", mean_of("output_tokens"))
    inter = [c for c in classes if not c.is_batch] or classes
    out["classes"] = classes
    out["slo"] = _tightest_slo(inter)
    if top is None:
        out["traffic"] = {"peak_requests_per_s": round(total, 6)}
    return out


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
    engine: Engine | list[Engine] = Field(
        default="vllm", description="serving engine, or the engines the user accepts: the planner plans each with "
                                    "its own performance model and flags and deploys the cheapest that meets the SLO")
    classes: list[RequestClass] | None = Field(
        default=None, description="request classes with their own lengths, targets and traffic; "
                                  "top-level prompt_tokens, output_tokens, slo (and traffic) then derive from them")
    trace: TraceSpec | None = Field(default=None, description="plan from a recorded request trace")
    weights_source: str | None = Field(
        default=None, min_length=1, max_length=500,
        description="where the weights come from: a Hugging Face id or an s3:// URI; required to render or "
                    "deploy a model given as a local config.json")

    _tl = field_validator("prompt_tokens", "output_tokens", mode="before")(_token_length)

    @model_validator(mode="before")
    @classmethod
    def _from_classes(cls, data: object) -> object:
        if isinstance(data, dict):
            if isinstance(data.get("trace"), str):
                data = {**data, "trace": {"path": data["trace"]}}
            return _merge_classes(data)
        return data

    @model_validator(mode="after")
    def _class_names(self) -> WorkloadSpec:
        names = [c.name for c in self.classes or []]
        if len(set(names)) != len(names):
            raise ValueError("classes: each class needs its own name")
        shares = [c.share for c in self.classes or [] if c.share is not None]
        if shares and abs(sum(shares) - 1.0) > 1e-6 and len(shares) == len(self.classes or []):
            raise ValueError(f"classes: the shares add up to {sum(shares):g}; they must add up to 1")
        if self.classes and self.trace is not None:
            raise ValueError("give classes or a trace, not both (a generic trace names each request's class)")
        return self

    @property
    def request_classes(self) -> list[RequestClass]:
        """The classes; the single-class form is one class named "default" with the top-level fields."""
        if self.classes:
            return list(self.classes)
        return [RequestClass(name="default", prompt_tokens=self.prompt_tokens, output_tokens=self.output_tokens,
                             slo=self.slo, traffic=self.traffic if self.traffic.peak_requests_per_s else None,
                             share=None if self.traffic.peak_requests_per_s else 1.0)]

    @field_validator("precision", mode="after")
    @classmethod
    def _nonempty(cls, v: object) -> object:
        if isinstance(v, list):
            if not v:
                raise ValueError("list at least one precision")
            if len(set(v)) != len(v):
                raise ValueError("precisions are listed twice")
        return v

    @field_validator("engine", mode="after")
    @classmethod
    def _engines_listed_once(cls, v: object) -> object:
        if isinstance(v, list):
            if not v:
                raise ValueError("list at least one engine")
            if len(set(v)) != len(v):
                raise ValueError("engines are listed twice")
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
    def engines(self) -> list[str]:
        """The engines the planner may deploy, in the order listed."""
        return list(self.engine) if isinstance(self.engine, list) else [self.engine]

    @property
    def single_engine(self) -> str:
        """The one engine of a workload planned for one engine (the planner plans a list of engines one
        at a time, sizing.planning.planner.plan_stack; compare's sweeps refuse a list); a list here is a bug."""
        if isinstance(self.engine, list):
            if len(self.engine) == 1:
                return self.engine[0]
            raise ValueError(f"a workload of several engines ({', '.join(self.engine)}) is planned one engine "
                             "at a time")
        return self.engine

    def for_engine(self, engine: str) -> WorkloadSpec:
        """This workload served by one engine."""
        return self.model_copy(update={"engine": engine})

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


# EC2 ids: an On-Demand Capacity Reservation and a Capacity Block are both capacity reservations,
# "cr-" + 17 hex digits (EC2 API Reference, CapacityReservation.CapacityReservationId); a reservation may
# also be targeted through a resource group (CapacityReservationTarget.CapacityReservationResourceGroupArn)
CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8,17}$")
RESOURCE_GROUP_ARN = re.compile(r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9_.-]{1,128}$")
AZ_ID = re.compile(r"^[a-z]{2,4}\d-az\d{1,2}$")


class CapacityReservation(_Strict):
    """One entry of `llmcap:hardware.capacity`: GPUs held for the stack (an ODCR or a Capacity Block).
    The planner puts the matching pool's instances on it first (up to `count`) and the rest on
    `purchase`/`commitment`; the program targets it from the node group's launch template."""

    kind: CapacityKind = Field(description="reservation (On-Demand Capacity Reservation) or capacity-block")
    id: str = Field(description="cr-... id, or (reservation only) a resource-group ARN of reservations")
    instance_type: str = Field(min_length=1, max_length=64)
    count: int = Field(gt=0, le=10_000, description="instances the reservation holds")
    availability_zone_id: str = Field(description="AZ ID the reservation is in, e.g. use1-az6 (aws ec2 "
                                                  "describe-capacity-reservations: AvailabilityZoneId)")
    start: date | None = Field(default=None, description="capacity-block: first day (UTC)")
    end: date | None = Field(default=None, description="when it ends (UTC); required for a capacity-block")
    usd_per_hour: float | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False,
                                       description="capacity-block: the per-instance-hour rate you paid; "
                                                   "default the catalog's capacity-block rate")

    @model_validator(mode="after")
    def _shape(self) -> CapacityReservation:
        if not CAPACITY_RESERVATION_ID.match(self.id) and not (
                self.kind == "reservation" and RESOURCE_GROUP_ARN.match(self.id)):
            what = "a cr-... id" + (" or a resource-group ARN" if self.kind == "reservation" else "")
            raise ValueError(f"id {self.id[:80]!r} is not {what}")
        if not AZ_ID.match(self.availability_zone_id):
            raise ValueError(f"availability_zone_id {self.availability_zone_id[:40]!r} is not an AZ ID such as "
                             "use1-az6")
        if self.kind == "capacity-block" and (self.start is None or self.end is None):
            raise ValueError("a capacity-block needs its start and end dates (aws ec2 describe-capacity-reservations "
                             "--capacity-reservation-ids ID: StartDate, EndDate)")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValueError(f"end {self.end} is not after start {self.start}")
        return self


# Issue 27: a 405B model with 64k-token outputs under strategy auto/mixed ran past 60 s (26 s wall, ~18 s CPU
# here: four step simulations of the finalists). The heaviest legitimate plans seen take ~20 s of CPU (a replayed
# Azure code trace, tests/test_traffic.py, on a loaded 2-core machine); 30 s of the planner's own CPU time stays
# above them and below the 60 s the issue calls a hang. CPU time, not wall time: a stack plans the same on a busy
# CI runner as on an idle laptop (other processes do not spend its budget).
DEFAULT_SEARCH_BUDGET_S = 30.0


# The most spare replicas (hardware.redundancy) a stack may ask for is max(REDUNDANCY_ALWAYS_ALLOWED, the
# replicas its demand needs). The standard redundancy levels are N+1, N+2 and 2N (a full second copy; the
# Uptime Institute's tiers top out at 2N): N+2 survives a failure during a rolling update even for a one-replica
# fleet, and more spares than the demand's own replicas is no redundancy scheme but a capacity floor (issue 27:
# `redundancy: 200` for a fleet of 2 passed validate). validate checks it against the requests in flight (an
# upper bound on the demand's replicas: each replica serves at least one), plan against the sized demand.
REDUNDANCY_ALWAYS_ALLOWED = 2


class HardwareSpec(_Strict):
    """Stack config key `llmcap:hardware`."""

    strategy: Strategy = "auto"
    search_budget_s: float = Field(
        default=DEFAULT_SEARCH_BUDGET_S, gt=0, le=3600, allow_inf_nan=False,
        description="CPU seconds the planner's search may take (also --search-budget); when spent, the plan is the "
                    "best feasible fleet found so far and says what was not tried")
    gpus: list[str] | None = Field(default=None, description="allowed GPU names; default every GPU in the region")
    instance_types: list[str] | None = Field(default=None, description="allowed instance types; default all")
    purchase: Purchase = "on-demand"
    redundancy: int = Field(default=1, ge=0, le=1000, description=(
        "extra replicas beyond demand (failover, updates); at most the larger of "
        f"{REDUNDANCY_ALWAYS_ALLOWED} and the replicas the demand needs (2N): more is refused by validate and plan"))
    autoscaling_headroom: float = Field(default=0.5, ge=0, le=10, allow_inf_nan=False,
                                        description="node-group max = desired × (1 + headroom), rounded up")
    spot_on_demand_floor: float = Field(default=0.5, ge=0, le=1, allow_inf_nan=False,
                                        description="with purchase=mixed: share of replicas kept on-demand")
    capacity: list[CapacityReservation] = Field(
        default_factory=list, max_length=20,
        description="reservations and Capacity Blocks the pools use first, one per instance type")
    commitment: Commitment = Field(default="none", description="the rate on-demand instances are paid at "
                                                               "(Savings Plan or reserved), beyond any reservation")

    @model_validator(mode="after")
    def _capacity(self) -> HardwareSpec:
        types = [c.instance_type for c in self.capacity]
        if len(set(types)) != len(types):
            raise ValueError("capacity: one reservation per instance type")
        if self.capacity and self.purchase == "mixed":
            raise ValueError("capacity: a reservation with purchase: mixed is not supported; use on-demand or spot "
                             "for the instances beyond the reservation")
        if self.commitment != "none" and self.purchase != "on-demand":
            raise ValueError(f"commitment {self.commitment} discounts on-demand instances; set purchase: on-demand")
        return self

    @field_validator("gpus", "instance_types")
    @classmethod
    def _nonempty_list(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not v:
            raise ValueError("list at least one, or leave the key out to allow all")
        return v
