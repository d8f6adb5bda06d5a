"""The capacity table of the design document: one full plan per GPU type × user level.

Each cell is what `llmcap plan STACK --set hardware.gpus=[GPU] --set <users> --format json` prints
(the cell keeps its `--set` overrides, so a reader can reproduce it, and tests/test_design_report.py
compares them): the planner is handed in by the command (`PlanWith`), this module never plans by itself.
An infeasible cell keeps the planner's problems as its reason. A stack given as a request rate has its
own traffic as the level `0` (no users override) besides the standard user levels.

Owns: the GPU types and user levels of the table, and the cells. Must not import matplotlib, pulumi,
boto3 or the report layer.

Units: $/month (730 h) is the GPU instances of the whole deployment (`Totals.usd_per_month`); $ per 1M
output tokens is GPU only at the planned load; replicas, GPUs and instances are totals over every pool.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from sizing.errors import NoFeasiblePlanError, SpecError

if TYPE_CHECKING:
    from sizing.plan import Plan

# the user levels every design document shows besides the stack's own (issue 30: 100 vs 1,000 users, and
# a pilot of 10)
STANDARD_USER_LEVELS = (10, 100, 1000)

PlanWith = Callable[[list[str]], "Plan"]  # --set overrides (on top of the stack's) -> the plan


class CapacityCell(BaseModel):
    """One GPU type at one user level: the cheapest plan restricted to that GPU, or why none exists."""

    model_config = ConfigDict(extra="forbid")

    gpu: str
    concurrent_users: int  # 0: the stack's own traffic (a request rate)
    sets: list[str]  # the --set overrides that reproduce the cell with `llmcap plan`
    feasible: bool
    instance_type: str = ""
    precision: str = ""
    tensor_parallel: int = 0
    replicas: int = 0  # total, with redundancy
    gpus: int = 0
    instances: int = 0
    usd_per_month: float | None = None  # GPU instances, 730 h
    usd_per_million_output_tokens: float | None = None  # GPU only, planned load
    reason: str = ""  # infeasible: the planner's problems (why this GPU type cannot meet the workload)


class CapacityTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpus: list[str]  # in the catalog's order
    user_levels: list[int]
    cells: list[CapacityCell]

    def cell(self, gpu: str, users: int) -> CapacityCell:
        return next(c for c in self.cells if c.gpu == gpu and c.concurrent_users == users)


def user_levels(plan: Plan) -> list[int]:
    """The stack's own concurrent users (0 for a stack given as a request rate: its own traffic) and the
    standard levels."""
    own = plan.workload.traffic.concurrent_users
    return sorted({*STANDARD_USER_LEVELS, int(own) if own else 0})


def table_gpus(plan: Plan, catalog_order: list[str]) -> list[str]:
    """The GPU types the planner considered for this stack in its region (the plan's alternatives),
    without those skipped for want of a datasheet row, in the catalog's order."""
    skipped = {a.gpu for a in plan.alternatives if not a.feasible and a.why_not_chosen.startswith("no-gpu-specs")}
    seen = {a.gpu for a in plan.alternatives} | {p.gpu for p in plan.pools}
    return [g for g in catalog_order if g in seen and g not in skipped]


def users_set(plan: Plan, users: int) -> str:
    """The --set that puts `users` concurrent users on the stack (a rate-based stack's traffic replaced whole)."""
    t = plan.workload.traffic
    if t.concurrent_users is not None:
        return f"workload.traffic.concurrent_users={users}"
    traffic: dict[str, float | int] = {"concurrent_users": users}
    tps = t.tokens_per_s_per_user or (None if plan.workload.tokens_per_s_per_user else planned_tokens_per_s(plan))
    if tps is not None:
        traffic["tokens_per_s_per_user"] = tps
    return "workload.traffic=" + json.dumps(traffic, separators=(",", ":"))


def planned_tokens_per_s(plan: Plan) -> float | None:
    """Output tokens/s one active request gets at the plan's own load (its pools' planned output over their
    planned requests in flight): a user level needs a per-user rate, and a request-rate stack whose targets
    are all TTFT implies none (sizing.spec WorkloadSpec._rate_known); None without a planned load."""
    out = sum(p.per_replica.planned_output_tokens_per_s * p.replicas_for_demand for p in plan.pools)
    conc = sum(p.per_replica.planned_concurrency * p.replicas_for_demand for p in plan.pools)
    return round(out / conc, 3) if out > 0 and conc > 0 else None


def cell_of(gpu: str, users: int, sets: list[str], plan_with: PlanWith) -> CapacityCell:
    try:
        p = plan_with(sets)
    except SpecError as e:  # a level the stack cannot be asked at (its one line, as `llmcap plan` prints it)
        return CapacityCell(gpu=gpu, concurrent_users=users, sets=sets, feasible=False, reason=str(e))
    except NoFeasiblePlanError as e:
        # the problems open with a heading line ending in ":", then one line per GPU type
        lines = [ln for ln in e.problems if not ln.endswith(":")] or e.problems
        reason = "; ".join(ln.removeprefix(f"{gpu}: ") for ln in lines) if lines \
            else str(e.args[0] if e.args else "no feasible plan")
        return CapacityCell(gpu=gpu, concurrent_users=users, sets=sets, feasible=False, reason=reason)
    lead = p.pools[0]
    return CapacityCell(
        gpu=gpu, concurrent_users=users, sets=sets, feasible=True,
        instance_type=" + ".join(q.instance_type for q in p.pools),
        precision=" + ".join(q.precision for q in p.pools), tensor_parallel=lead.tensor_parallel,
        replicas=sum(q.replicas for q in p.pools), gpus=p.totals.gpus, instances=p.totals.instances,
        usd_per_month=p.totals.usd_per_month,
        usd_per_million_output_tokens=p.totals.usd_per_million_output_tokens)


def capacity_table(plan: Plan, catalog_order: list[str], plan_with: PlanWith) -> CapacityTable:
    """Every GPU type the stack's region offers × every user level, each a full plan by `plan_with`."""
    gpus = table_gpus(plan, catalog_order)
    levels = user_levels(plan)
    cells = [cell_of(g, n, [f"hardware.gpus=[{g}]"] + ([users_set(plan, n)] if n else []), plan_with)
             for g in gpus for n in levels]
    return CapacityTable(gpus=gpus, user_levels=levels, cells=cells)


PURCHASE_OPTIONS = ("on-demand", "spot", "mixed")  # sizing.spec HardwareSpec.purchase


def purchase_options(plan: Plan, plan_with: PlanWith) -> list[CapacityCell]:
    """The stack planned at each purchase option (the GPU column: the chosen plan's first pool)."""
    users = plan.workload.traffic.concurrent_users or 0
    return [cell_of(plan.pools[0].gpu, users, [f"hardware.purchase={p}"], plan_with) for p in PURCHASE_OPTIONS]
