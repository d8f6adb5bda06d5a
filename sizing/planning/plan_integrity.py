"""Is a plan file what the planner said? The checks behind refusing a hand-edited saved plan.

Two checks, both without re-planning (a saved plan is deployed as reviewed, whatever this machine's
catalog cache or calibration overlay say, so recomputing it here would refuse every plan written
before a price refresh):

- `body_digest`: sha256 over the canonical JSON of a saved plan's body (every key but `digest`:
  fingerprint, generation, pinned rows and the Plan). `llmcap plan --write` stores it; any edit of
  the content (not its formatting) changes it.
- `plan_problems`: the Plan's own figures, as sizing/planning/builder.py and candidates.py derive
  them: every number finite and not negative; per pool, replicas = demand + redundancy, the instances
  that hold them, min <= desired <= max, the GPUs a replica takes, the pool's $/hour; the totals equal
  the sum of the pools, the month is the cost model's hours of the hour, the all-in month the sum of
  the cost lines. It catches an edit whose digest was
  recomputed too, and a bare Plan JSON (`llmcap plan --format json`), which carries no digest.

Pure: no I/O, no pulumi.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from sizing.plan import Plan, Pool

DIGEST_KEY = "digest"
# the builder rounds dollars per hour to 4 decimals and per month to 2 (sizing/planning/builder.py)
USD_PER_HOUR_TOLERANCE = 1e-3
USD_PER_MONTH_TOLERANCE = 0.02


def body_digest(doc: dict[str, Any]) -> str:
    """`sha256:<hex>` of a saved plan's body: its keys but `digest`, sorted, compact, ASCII."""
    body = {k: v for k, v in doc.items() if k != DIGEST_KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def number_problems(value: Any, where: str) -> list[str]:
    """Every number under `value` that is NaN, infinite or negative, named by its JSON path."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in number_problems(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in number_problems(v, f"{where}[{i}]")]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return []
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{where} is not a finite number ({'NaN' if math.isnan(value) else value})"]
    if value < 0:
        return [f"{where} is negative ({value})"]
    return []


def instances_for(pool: Pool) -> int:
    """The instances that hold the pool's replicas (sizing.planning.candidates.instances_for)."""
    if pool.nodes_per_replica > 1:
        return pool.replicas * pool.nodes_per_replica
    return math.ceil(pool.replicas / max(pool.replicas_per_instance, 1))


def pool_problems(p: Pool) -> list[str]:
    at = f"pool {p.name}"
    out = []
    if p.replicas != p.replicas_for_demand + p.redundancy_replicas:
        out.append(f"{at}: replicas {p.replicas} is not replicas_for_demand {p.replicas_for_demand} + "
                   f"redundancy_replicas {p.redundancy_replicas}")
    if p.instances_desired != instances_for(p):
        out.append(f"{at}: instances_desired {p.instances_desired} does not hold replicas {p.replicas} "
                   f"({p.replicas_per_instance} per instance, {p.nodes_per_replica} node(s) per replica: "
                   f"{instances_for(p)})")
    if not p.instances_min <= p.instances_desired <= p.instances_max:
        out.append(f"{at}: instances_min {p.instances_min} <= instances_desired {p.instances_desired} <= "
                   f"instances_max {p.instances_max} does not hold")
    if p.replicas > p.replicas_max:
        out.append(f"{at}: replicas {p.replicas} above replicas_max {p.replicas_max}")
    if p.tensor_parallel * p.pipeline_parallel * p.replicas_per_instance > p.gpus_per_instance * p.nodes_per_replica:
        out.append(f"{at}: {p.replicas_per_instance} replica(s) of tensor_parallel {p.tensor_parallel} x "
                   f"pipeline_parallel {p.pipeline_parallel} do not fit {p.gpus_per_instance} GPUs per instance")
    if p.vllm.tensor_parallel_size != p.tensor_parallel or p.vllm.pipeline_parallel_size != p.pipeline_parallel:
        out.append(f"{at}: vllm tensor/pipeline parallel sizes differ from the pool's")
    if abs(p.usd_per_hour - p.instances_desired * p.usd_per_instance_hour) > USD_PER_HOUR_TOLERANCE:
        out.append(f"{at}: usd_per_hour {p.usd_per_hour:g} is not instances_desired {p.instances_desired} x "
                   f"usd_per_instance_hour {p.usd_per_instance_hour:g}")
    return out


def totals_problems(plan: Plan, hours_per_month: float) -> list[str]:
    t, pools = plan.totals, plan.pools
    out = []
    instances = sum(p.instances_desired for p in pools)
    gpus = sum(p.instances_desired * p.gpus_per_instance for p in pools)
    usd_h = sum(p.usd_per_hour for p in pools)
    if t.instances != instances:
        out.append(f"totals.instances {t.instances} is not the pools' {instances} instances")
    if t.gpus != gpus:
        out.append(f"totals.gpus {t.gpus} is not the pools' {gpus} GPUs")
    if abs(t.usd_per_hour - usd_h) > USD_PER_HOUR_TOLERANCE:
        out.append(f"totals.usd_per_hour {t.usd_per_hour:g} is not the pools' {usd_h:g}")
    if abs(t.usd_per_month - t.usd_per_hour * hours_per_month) > USD_PER_MONTH_TOLERANCE:
        out.append(f"totals.usd_per_month {t.usd_per_month:g} is not {hours_per_month:g} h of usd_per_hour "
                   f"{t.usd_per_hour:g}")
    if abs(t.all_in_usd_per_month - t.usd_per_month - t.platform_usd_per_month) > USD_PER_MONTH_TOLERANCE:
        out.append(f"totals.all_in_usd_per_month {t.all_in_usd_per_month:g} is not usd_per_month + "
                   f"platform_usd_per_month")
    lines = sum(c.usd_per_month or 0.0 for c in plan.cost_lines)
    if plan.cost_lines and abs(lines - t.all_in_usd_per_month) > USD_PER_MONTH_TOLERANCE * len(plan.cost_lines):
        out.append(f"totals.all_in_usd_per_month {t.all_in_usd_per_month:g} is not the sum of its cost lines "
                   f"{lines:.2f}")
    if not t.usd_per_month_min <= t.usd_per_month + USD_PER_MONTH_TOLERANCE:
        out.append(f"totals.usd_per_month_min {t.usd_per_month_min:g} above usd_per_month {t.usd_per_month:g}")
    if not t.usd_per_month <= t.usd_per_month_max + USD_PER_MONTH_TOLERANCE:
        out.append(f"totals.usd_per_month {t.usd_per_month:g} above usd_per_month_max {t.usd_per_month_max:g}")
    return out


def one_line(problems: list[str]) -> str:
    """The first problem, and how many more there are."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return problems[0] + more


def plan_problems(plan: Plan, hours_per_month: float) -> list[str]:
    """Why the plan's figures cannot be the planner's; [] when they add up. `hours_per_month` is the
    cost model's (sizing.cost.money.HOURS_PER_MONTH), handed in by the caller."""
    out = number_problems(plan.model_dump(mode="python"), "plan")
    if not plan.pools:
        out.append("plan has no pools")
    for p in plan.pools:
        out += pool_problems(p)
    return out + totals_problems(plan, hours_per_month)
