"""The `llmcap compare` document: one versioned pydantic model (`Comparison`) of the options compared,
the verdict and, with `--sweep`, the sweep (`Sweep`: points, crossovers, feasibility edges). Built by
sizing.analysis.compare (the options, the verdict) and sizing.analysis.sweep (the sweep); read by every
compare view (sizing.report.compare_views), the plot (sizing.report.plot) and `--format json`.

Pure data: imports no planning, so the views depend on the document only. Like sizing.analysis.diff's
`CostDiff`, a change to the document's meaning bumps SCHEMA_VERSION.

Units: $/hour and $/month (730 h) are GPU instances of the whole deployment of an option (every pool);
`all_in_usd_per_month` adds the platform; $ per 1M output tokens at the planned load; latencies in ms,
the slowest pool's; headroom and blast radius are shares (0..1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

if TYPE_CHECKING:
    from sizing.stack import Stack

SCHEMA_VERSION = 1
NO_PLAN = "no plan meets the SLO"  # a sweep point's deployment when no candidate meets the SLO


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Option:
    """One thing compared: a stack planned with a strategy."""

    label: str
    stack: Stack
    strategy: str


# ---------------------------------------------------------------- the sweep


class SweepPoint(_M):
    """One option at one swept value: the cheapest deployment that meets the SLO there.

    The fields are the document's (rounded: $/hour and $/1M to 4 decimals, $/month to cents); the
    crossover search compares the unrounded $/hour (`exact_usd_per_hour`, set by
    sizing.analysis.sweep.priced_point). None: no candidate meets
    the SLO at this value."""

    x: float
    usd_per_hour: float | None
    usd_per_month: float | None
    usd_per_million_output_tokens: float | None
    gpus: int
    deployment: str  # e.g. "3× g6.12xlarge fp8 TP4"
    _exact_usd_per_hour: float | None = PrivateAttr(default=None)

    def set_exact_usd_per_hour(self, usd_per_hour: float) -> None:
        """Keep the unrounded $/hour this point's rounded fields came from."""
        self._exact_usd_per_hour = usd_per_hour

    @property
    def exact_usd_per_hour(self) -> float | None:
        """The unrounded $/hour when this point was priced here (a point read back from JSON: the rounded one)."""
        return self._exact_usd_per_hour if self._exact_usd_per_hour is not None else self.usd_per_hour

    @property
    def feasible(self) -> bool:
        return self.usd_per_hour is not None


class Crossover(_M):
    """Where the cheaper of two options changes: `cheaper_after` is cheaper from `x` on, `cheaper_before`
    was cheaper at `last_x_before` (the last value with the old order, swept or refined)."""

    between: list[str]
    x: float
    last_x_before: float
    variable: str
    cheaper_before: str
    cheaper_after: str
    usd_per_month_at_x: dict[str, float]  # each option's $/month at x
    text: str


class FeasibilityEdge(_M):
    """Where an option starts (`feasible` "above") or stops ("below") having a plan that meets the SLO:
    a plan exists at `x`, none at `other_x`."""

    option: str
    variable: str
    feasible: Literal["above", "below"]
    x: float
    other_x: float
    text: str


class CheapestApi(_M):
    """The cheapest hosted-API price for the compared model (or the nearest comparable one), USD per 1M tokens."""

    provider: str
    model: str
    exact_model: bool
    usd_per_million_output_tokens: float
    usd_per_million_input_tokens: float
    note: str
    # what the API bills per 1M output tokens of this workload's traffic: the output price plus the input
    # price × prompt tokens per output token (the self-hosted $/1M output tokens pays for prefill too);
    # the figure every comparison, plot and line shows (the output price alone flatters self-hosting)
    usd_per_million_output_tokens_with_input: float = 0.0
    prompt_tokens_per_output_token: float = 0.0
    # prefix reuse: the API's cache-read price, None when it has none, and the share of input billed at it
    usd_per_million_cached_input_tokens: float | None = None
    cached_input_share: float = 0.0


class Sweep(_M):
    """Every option priced at every swept value, in the order of `values`."""

    variable: str  # one of SWEEP_VARS
    label: str  # the variable in words, SWEEP_VARS
    log_spaced: bool
    values: list[float]
    series: dict[str, list[SweepPoint]]  # option label → one point per value
    crossovers: list[Crossover]
    feasibility_edges: list[FeasibilityEdge]
    cheapest_api: CheapestApi | None
    warnings: list[str]


# ---------------------------------------------------------------- the options and the verdict


class OptionSummary(_M):
    """One option that has a plan: the Plan's figures every view shows, plus blast radius and cold start.

    `same_as`: the label of an earlier option that is the identical deployment (absent otherwise)."""

    label: str
    stack: str
    strategy: str
    feasible: Literal[True] = True
    model: str
    pools: list[str]  # "6× g6.12xlarge (12 replicas of L4 ×2, int4-awq)"
    gpu: str  # the first pool's
    instance_type: str
    precision: str
    gpus: int
    instances: int
    usd_per_hour: float  # GPU instances, at desired size
    usd_per_month: float
    all_in_usd_per_month: float  # GPU instances + platform
    usd_per_million_output_tokens: float  # GPU only, at planned load
    usd_per_million_output_tokens_at_capacity: float
    # per SLO target (sizing.spec.Slo.targets, exactly those the stack set): "TTFT p95 450 ms (55%)", the
    # slowest pool's prediction at the planned load and its headroom 1 - predicted / target
    slo_figures: list[str]
    slo_headroom: float  # the tightest target's headroom over all pools (negative: over the target)
    blast_radius: float  # share of goodput capacity lost when the worst node fails
    survives_node_loss: bool
    cold_start_s: float  # a new replica on a new node until it serves, the slowest pool's
    utilization: float  # planned load / goodput capacity
    cheapest_api_usd_per_million_output_tokens: float | None  # the API's same-traffic bill (input + output) per 1M out
    warnings: list[str]
    same_as: str | None = None

    @model_serializer(mode="wrap")
    def _absent_same_as(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if self.same_as is None:
            out.pop("same_as", None)
        return out


class InfeasibleOption(_M):
    """One option without a plan that meets the SLO, and why (the planner's problems and suggestions)."""

    label: str
    stack: str
    strategy: str
    feasible: Literal[False] = False
    problems: list[str]
    suggestions: list[str]


OptionRow = OptionSummary | InfeasibleOption


class Comparison(_M):
    """The `llmcap compare --format json` document: every option, the winner and why; with a sweep,
    its points, crossovers (repeated at the top level) and feasibility edges. `sweep` is absent
    from the JSON when no sweep was asked for."""

    schema_version: int = SCHEMA_VERSION
    options: list[OptionRow]
    winner: str | None
    reason: str
    crossovers: list[Crossover] = Field(default_factory=list)
    sweep: Sweep | None = None

    @model_validator(mode="after")
    def _crossovers_are_the_sweeps(self) -> Comparison:
        if self.crossovers != (self.sweep.crossovers if self.sweep else []):
            raise ValueError("crossovers: must be the sweep's crossovers (none without a sweep)")
        return self

    @model_serializer(mode="wrap")
    def _absent_sweep(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if self.sweep is None:
            out.pop("sweep", None)
        return out

    def with_sweep(self, sweep: Sweep | None) -> Comparison:
        """This comparison with a sweep of the same options (None: without one)."""
        return Comparison(options=self.options, winner=self.winner, reason=self.reason,
                          crossovers=list(sweep.crossovers) if sweep else [], sweep=sweep)
