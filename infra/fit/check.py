"""The deployability check: does the plan fit the platform it will run on, before anything is created?

Pure Python (no pulumi import, so `llmcap render` and tests can call it without the engine). Rules are
functions of a `FitContext` that yield `FitProblem`s; they register with `@fit_rule("kebab-id")`.
`check_deployable` runs every registered rule and returns a `FitReport` with the problems and one
row of figures per pool (what `llmcap render` prints as the fit table).

Rule modules: `infra.fit.rules` (placement, allocatable, storage, served model, AZs, API key) and,
when present, `infra.fit.platform_rules` (endpoint reachability, image sources, version
compatibility). A rule module may also register row contributors with `@fit_row` to add columns.
Every number a rule uses comes from a data row with its source (see sizing/data/*.csv).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sizing.errors import LlmcapError

if TYPE_CHECKING:  # types only; importing them at runtime is fine too, they are pure sizing/ modules
    from sizing.catalog.lookup import Catalog
    from sizing.plan import Plan
    from sizing.stack import Stack


@dataclass(frozen=True)
class FitProblem:
    """One reason the plan would not come up. `message` is ONE line: the problem and the fix."""

    rule: str  # kebab id, e.g. "requests-exceed-allocatable"
    subject: str  # the pool name or resource it is about
    message: str
    source: str  # where the rule comes from (doc URL / repo path + version)

    def line(self) -> str:
        return f"[{self.rule}] {self.subject}: {self.message}"


@dataclass(frozen=True)
class FitContext:
    stack: Stack
    plan: Plan
    catalog: Catalog
    api_key: str | None = None  # the plain key when the caller knows it (None: unknown / a secret)
    extra: dict[str, Any] = field(default_factory=dict)  # caller-supplied facts for platform rules


@dataclass
class FitReport:
    problems: list[FitProblem]
    rows: list[dict[str, object]]  # one per pool: allocatable vs requests, storage vs checkpoint, ...

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        return [p.line() for p in self.problems]


Rule = Callable[[FitContext], Iterable[FitProblem]]
RowContributor = Callable[[FitContext], dict[str, dict[str, object]]]  # pool name -> extra columns

RULES: dict[str, Rule] = {}
ROW_CONTRIBUTORS: list[RowContributor] = []

# modules that register rules; optional ones may be absent (another part of the project adds them)
RULE_MODULES = ("infra.fit.rules", "infra.fit.capacity_rules")
OPTIONAL_RULE_MODULES = ("infra.fit.platform_rules",)


def fit_rule(rule_id: str) -> Callable[[Rule], Rule]:
    """Register `fn` as the rule `rule_id` (kebab-case, unique)."""

    def register(fn: Rule) -> Rule:
        if rule_id in RULES and RULES[rule_id] is not fn:
            raise ValueError(f"fit rule {rule_id!r} registered twice")
        RULES[rule_id] = fn
        return fn

    return register


def fit_row(fn: RowContributor) -> RowContributor:
    """Register a function that adds columns to the per-pool rows."""
    if fn not in ROW_CONTRIBUTORS:
        ROW_CONTRIBUTORS.append(fn)
    return fn


def load_rules() -> dict[str, Rule]:
    for name in RULE_MODULES:
        importlib.import_module(name)
    for name in OPTIONAL_RULE_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
    return RULES


def check_deployable(ctx: FitContext) -> FitReport:
    """Run every registered rule on `ctx`; the problems in rule order, and one row per pool."""
    load_rules()
    problems: list[FitProblem] = []
    for rule_id, fn in RULES.items():
        for p in fn(ctx):
            if p.rule != rule_id:
                p = FitProblem(rule_id, p.subject, p.message, p.source)
            problems.append(p)
    rows: list[dict[str, object]] = [{"pool": pool.name} for pool in ctx.plan.pools]
    by_name = {r["pool"]: r for r in rows}
    for contrib in ROW_CONTRIBUTORS:
        for pool_name, cols in contrib(ctx).items():
            if pool_name in by_name:
                by_name[pool_name].update(cols)
    return FitReport(problems=problems, rows=rows)


class NotDeployable(LlmcapError):
    """The plan would not come up (exit 2); `problems` are one line each, naming the rule."""

    def __init__(self, report: FitReport) -> None:
        self.report = report
        lines = report.lines()
        super().__init__(f"not deployable: {len(lines)} problem(s)", lines)


def print_fit_table(report: FitReport, echo: Callable[[Any], None], width: int = 80) -> None:
    """The per-pool figures (columns: the union of the rows' keys, in order) as a table when it fits `width`
    columns, else key: value per pool (sizing.report.format.fitted_table), handed to `echo` (e.g. a rich
    Console's print)."""
    from sizing.report.format import fitted_table

    cols: list[str] = []
    for r in report.rows:
        cols.extend(k for k in r if k not in cols)
    echo(fitted_table("deployability check (infra/fit/check.py)" + ("" if report.ok else " -- FAILED"), cols,
                      [[_cell(r.get(c, "")) for c in cols] for r in report.rows], width))


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:,.1f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)
