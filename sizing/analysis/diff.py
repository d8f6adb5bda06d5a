"""Cost diff between two versions of the stacks: the model behind `llmcap diff`.

Reads stack files and their saved plans (`stacks/Pulumi.<env>.plan.json`, see sizing/planning/saved_plan.py)
from git (`git show REF:path`, subprocess, no GitPython) or the working tree. A side whose ref has a
saved plan is that plan (what `pulumi up` deploys at that ref), checked against the stack file's
fingerprint there; a side without one is planned here with the bundled calibration only (no user
overlay, so a diff reproduces on any machine). Each side says which (`plan_source`). Returns a
`CostDiff`: one versioned model that diff_views renders as markdown (the PR comment), JSON and a
table. A side that cannot be planned (invalid, infeasible, or a stale saved plan) keeps its reason;
its cost is unknown (None), never $0. A stack file renamed between the refs (same or similar text)
is one `renamed` stack, not removed + added. Must not import pulumi or boto3.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from sizing.errors import LlmcapError, SpecError
from sizing.plan import CostLine, Plan
from sizing.planning.capacity import ends_line

if TYPE_CHECKING:
    from pathlib import Path

DIFF_SCHEMA_VERSION = 1
Status = Literal["added", "removed", "modified", "unchanged", "renamed"]
PlanSource = Literal["saved", "re-planned"]
# a side whose saved plan is not what `llmcap plan --write` wrote (sizing.planning.saved_plan.SavedPlanRefusedError):
# its reason starts with this, and the diff fails on it whether or not a gate is set
REFUSED = "refused saved plan"
RENAME_SIMILARITY = 0.6  # difflib ratio of two stack files' text above which a removed + added pair is a rename


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ApiPick(_M):
    """The cheapest hosted API for the same traffic."""

    provider: str
    model: str
    usd_per_month_same_traffic: float
    ratio_to_self_hosted: float
    cached: str = ""  # how its bill prices the reused prefix (ApiComparison.cached_note), "" without reuse


class Side(_M):
    """One side of a stack's diff: a summary of its Plan, or why there is none.

    `usd_per_month` is the all-in monthly bill (GPU instances + platform) at the planned size;
    the range is node-group minimums .. autoscaling maximums, platform included.
    """

    ref: str
    planned: bool
    reason: str | None = None  # why there is no plan (invalid stack file, infeasible, stale saved plan)
    plan_source: PlanSource | None = None  # the ref's saved plan, or planned here (None: --from/--to files)
    plan_file: str | None = None  # the saved plan's path at the ref, when there is one
    model: str | None = None
    region: str | None = None
    gpus: int | None = None
    instances: int | None = None
    gpu_types: list[str] = Field(default_factory=list)
    instance_types: list[str] = Field(default_factory=list)
    pools: list[str] = Field(default_factory=list)  # "2× g6.12xlarge (L4 ×4, TP1, fp8, on-demand)"
    usd_per_hour: float | None = None  # GPU instances at desired size
    gpu_usd_per_month: float | None = None
    platform_usd_per_month: float | None = None
    usd_per_month: float | None = None  # all-in, expected
    usd_per_month_min: float | None = None
    usd_per_month_max: float | None = None
    usd_per_million_output_tokens: float | None = None  # all-in, planned load
    budget_usd_month: float | None = None  # the stack's llmcap:budget_usd_month (all-in), if set
    demand_output_tokens_per_s: float | None = None
    concurrent_users: float | None = None
    slo: str | None = None  # every latency target, as sizing.spec.Slo.describe spells it (a percentile is part of it)
    cheapest_api: ApiPick | None = None
    cost_lines: list[CostLine] = Field(default_factory=list)
    resources: list[CostLine] = Field(default_factory=list)  # priced from --preview-json, when given
    capacity_ends: list[str] = Field(default_factory=list)  # one line per pool on a reservation that ends


class StackDiff(_M):
    stack: str
    path: str
    status: Status
    before: Side | None
    after: Side | None
    delta_usd_per_month: float | None  # None when either side has no price
    delta_percent: float | None  # None when there is no base to divide by
    delta_usd_per_hour: float | None = None
    renamed_from: str | None = None  # the stack file's path at base, for a renamed stack
    notes: list[str] = Field(default_factory=list)


class CostDiff(_M):
    schema_version: int = DIFF_SCHEMA_VERSION
    base: str
    head: str
    source: Literal["git", "saved-plans"] = "git"  # planned here from git, or re-rendered from saved plans
    stacks: list[StackDiff]
    unchanged_files: int = 0  # stack files whose text is identical on both sides (not planned)
    total_before_usd_per_month: float
    total_after_usd_per_month: float
    total_delta_usd_per_month: float
    total_delta_percent: float | None
    stacks_not_priced: list[str] = Field(default_factory=list)  # stacks whose delta is unknown

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


# ---------------------------------------------------------------- plans to sides


def side_from_plan(plan: Plan, ref: str) -> Side:
    t = plan.totals
    slo, traffic = plan.workload.slo, plan.workload.traffic
    api = min(plan.api_comparison, key=lambda a: a.usd_per_month_same_traffic) if plan.api_comparison else None
    platform_usd_per_month = t.platform_usd_per_month
    return Side(
        ref=ref, planned=True, model=plan.model, region=plan.region, gpus=t.gpus, instances=t.instances,
        gpu_types=sorted({p.gpu for p in plan.pools}), instance_types=sorted({p.instance_type for p in plan.pools}),
        pools=[f"{p.instances_desired}× {p.instance_type} ({p.gpu} ×{p.gpus_per_instance}, TP{p.tensor_parallel}"
               f"{'×PP' + str(p.pipeline_parallel) if p.pipeline_parallel > 1 else ''}, {p.precision}, {p.purchase}"
               # the engine when it is not the default, so a switch of engine shows in the PR comment
               f"{', ' + p.engine if p.engine != 'vllm' else ''})"
               for p in plan.pools],
        usd_per_hour=round(t.usd_per_hour, 4), gpu_usd_per_month=round(t.usd_per_month, 2),
        platform_usd_per_month=round(platform_usd_per_month, 2), usd_per_month=round(t.all_in_usd_per_month, 2),
        usd_per_month_min=round(t.usd_per_month_min + platform_usd_per_month, 2),
        usd_per_month_max=round(t.usd_per_month_max + platform_usd_per_month, 2),
        usd_per_million_output_tokens=t.all_in_usd_per_million_output_tokens,
        demand_output_tokens_per_s=t.demand_output_tokens_per_s,
        concurrent_users=traffic.concurrent_users, budget_usd_month=plan.budget_usd_month,
        slo=slo.describe(),
        cheapest_api=ApiPick(provider=api.provider, model=api.model,
                             usd_per_month_same_traffic=api.usd_per_month_same_traffic,
                             ratio_to_self_hosted=api.ratio_to_self_hosted, cached=api.cached_note()) if api else None,
        cost_lines=list(plan.cost_lines),
        capacity_ends=[ends_line(p.purchase, p.capacity_reservation_id, p.capacity_ends) for p in plan.pools
                       if p.capacity_reservation_id and p.capacity_ends],
    )


def side_unplanned(ref: str, error: LlmcapError, kind: str | None = None) -> Side:
    kind = kind or ("infeasible" if error.exit_code == 3 else "invalid")
    return Side(ref=ref, planned=False, reason=f"{kind}: " + "; ".join(error.problems))


def _same_plan(a: Side, b: Side) -> bool:
    keys = ("planned", "model", "region", "pools", "usd_per_month", "usd_per_month_min", "usd_per_month_max",
            "usd_per_million_output_tokens", "slo", "cost_lines", "resources")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def stack_diff(stack: str, path: str, before: Side | None, after: Side | None,
               renamed_from: str | None = None) -> StackDiff:
    """Status and deltas of one stack. A missing side counts as $0 (added/removed); an unplanned
    side has no price, so the delta is unknown (None), not a number."""
    if before is None and after is None:
        raise ValueError("a stack diff needs at least one side")
    status: Status
    if renamed_from is not None:
        status = "renamed"
    elif before is None:
        status = "added"
    elif after is None:
        status = "removed"
    else:
        status = "unchanged" if _same_plan(before, after) else "modified"
    # a missing side is $0; an unplanned side's None stays None (unknown)
    before_usd_per_month = 0.0 if before is None else before.usd_per_month
    after_usd_per_month = 0.0 if after is None else after.usd_per_month
    before_usd_per_hour = 0.0 if before is None else before.usd_per_hour
    after_usd_per_hour = 0.0 if after is None else after.usd_per_hour
    notes: list[str] = []
    delta_usd_per_month = None if after_usd_per_month is None or before_usd_per_month is None \
        else round(after_usd_per_month - before_usd_per_month, 2)
    delta_percent = round(100.0 * delta_usd_per_month / before_usd_per_month, 2) \
        if delta_usd_per_month is not None and before_usd_per_month else None
    if renamed_from is not None:
        changed = "" if before is not None and after is not None and _same_plan(before, after) else \
            "; its plan changed too"
        notes.append(f"renamed from {renamed_from}{changed}: Pulumi sees a new stack {stack!r}; the old stack's "
                     "resources stay until it is destroyed (pulumi destroy -s OLD)")
    for side, name in ((before, "before"), (after, "after")):
        if side is not None and not side.planned:
            notes.append(f"{name}: {side.reason}")
    return StackDiff(stack=stack, path=path, status=status, before=before, after=after,
                     delta_usd_per_month=delta_usd_per_month, delta_percent=delta_percent,
                     delta_usd_per_hour=None if after_usd_per_hour is None or before_usd_per_hour is None
                     else round(after_usd_per_hour - before_usd_per_hour, 4),
                     renamed_from=renamed_from, notes=notes)


def build_diff(base: str, head: str, stacks: list[StackDiff], unchanged_files: int = 0,
               source: Literal["git", "saved-plans"] = "git") -> CostDiff:
    """The diff of every stack, with totals over the stacks whose delta is known (all-in $/month)."""
    stacks = sorted(stacks, key=lambda s: s.stack)
    before_usd_per_month = sum(s.before.usd_per_month for s in stacks if s.before and s.before.usd_per_month
                               is not None and s.delta_usd_per_month is not None)
    after_usd_per_month = sum(s.after.usd_per_month for s in stacks if s.after and s.after.usd_per_month
                              is not None and s.delta_usd_per_month is not None)
    delta_usd_per_month = round(sum(s.delta_usd_per_month for s in stacks if s.delta_usd_per_month is not None), 2)
    return CostDiff(base=base, head=head, source=source, stacks=stacks, unchanged_files=unchanged_files,
                    total_before_usd_per_month=round(before_usd_per_month, 2),
                    total_after_usd_per_month=round(after_usd_per_month, 2),
                    total_delta_usd_per_month=delta_usd_per_month,
                    total_delta_percent=round(100.0 * delta_usd_per_month / before_usd_per_month, 2)
                    if before_usd_per_month else None,
                    stacks_not_priced=[s.stack for s in stacks if s.delta_usd_per_month is None])


def diff_plans(before: Plan | None, after: Plan | None, base: str = "from", head: str = "to") -> CostDiff:
    """Diff two saved plans (`--from a.json --to b.json`) without recomputing."""
    name = (after or before).stack if (after or before) else "stack"  # type: ignore[union-attr]
    sd = stack_diff(name, "", side_from_plan(before, base) if before else None,
                    side_from_plan(after, head) if after else None)
    return build_diff(base, head, [sd], source="saved-plans")


class Planner(Protocol):
    """Plans a stack file's text: `(stack name, text, source, trace_at)`; `trace_at` reads the stack's trace
    path at the side's ref (sizing.adapters.git.Traces.opener; None: from disk)."""

    def __call__(self, name: str, text: str, source: str, trace_at: Callable[[str], Path] | None = None) -> Plan:
        ...


def saved_side(name: str, text: str, plan_text: str, ref: str, path: str,
               trace_at: Callable[[str], Path] | None = None) -> tuple[Side, Any]:
    """A side from the ref's saved plan, checked against the stack file there; (side, SavedPlan or None)."""
    from sizing.planning.saved_plan import (
        SavedPlanRefusedError,
        StalePlanError,
        check_current,
        parse_saved_plan,
        saved_plan_path,
    )
    from sizing.stack import config_from_text, stack_from_config

    plan_file = saved_plan_path(path).as_posix()
    try:
        stack = stack_from_config(name, config_from_text(text, f"{ref}:{path}"), f"{ref}:{path}",
                                  trace_at=trace_at)
        saved = parse_saved_plan(plan_text, f"{ref}:{plan_file}", path)
        check_current(saved, stack, path)
    except SavedPlanRefusedError as e:
        side = side_unplanned(ref, e, REFUSED)
        return side.model_copy(update={"plan_source": "saved", "plan_file": plan_file}), None
    except StalePlanError as e:
        side = side_unplanned(ref, e, "stale saved plan")
        return side.model_copy(update={"plan_source": "saved", "plan_file": plan_file}), None
    except LlmcapError as e:
        return side_unplanned(ref, e).model_copy(update={"plan_source": "saved", "plan_file": plan_file}), None
    side = side_from_plan(saved.plan, ref).model_copy(update={"plan_source": "saved", "plan_file": plan_file})
    return side, saved


def _declared_budget(text: str) -> float | None:
    """The `llmcap:budget_usd_month` a stack file declares, read even when the stack cannot be planned."""
    from sizing.stack import config_from_text

    try:
        v = config_from_text(text, "").get("llmcap:budget_usd_month")
    except LlmcapError:
        return None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def plan_side(planner: Planner, name: str, text: str, ref: str, path: str, plan_text: str | None = None,
              trace_at: Callable[[str], Path] | None = None) -> Side:
    if plan_text is not None:
        side = saved_side(name, text, plan_text, ref, path, trace_at)[0]
    else:
        try:
            side = side_from_plan(planner(name, text, f"{ref}:{path}", trace_at), ref)
        except LlmcapError as e:
            side = side_unplanned(ref, e)
        side = side.model_copy(update={"plan_source": "re-planned"})
    if not side.planned:  # its own budget gate still applies (and fails closed)
        side = side.model_copy(update={"budget_usd_month": _declared_budget(text)})
    return side


def pair_renames(removed: dict[str, str], added: dict[str, str]) -> dict[str, str]:
    """Added path → removed path for stack files that were renamed: the same text, else the most
    similar text above RENAME_SIMILARITY (difflib ratio, as git's rename detection scores similarity)."""
    import difflib

    pairs: dict[str, str] = {}
    left = dict(removed)
    for new_path, new_text in sorted(added.items()):
        same = next((p for p, t in sorted(left.items()) if t == new_text), None)
        if same is None:
            scored = sorted(((difflib.SequenceMatcher(None, t, new_text).ratio(), p) for p, t in left.items()),
                            reverse=True)
            same = scored[0][1] if scored and scored[0][0] >= RENAME_SIMILARITY else None
        if same is not None:
            pairs[new_path] = same
            del left[same]
    return pairs


def attach_resources(diff: CostDiff, stack: str, lines: list[CostLine]) -> None:
    """Add resource-level lines (priced from a preview or render) to a stack's head side."""
    for s in diff.stacks:
        if s.stack == stack and s.after is not None:
            s.after.resources = lines
            return
    known = ", ".join(s.stack for s in diff.stacks if s.after is not None) or "none"
    raise SpecError(f"--preview-json: stack {stack!r} is not in this diff (stacks with a head side: {known})")
