"""Per-class percentiles against targets, the trace's statistics and the replayed fleet, for the plan
table and the PR comment (sizing/report/plan_views.py calls these). Pure functions of the Plan."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sizing.humanize import num

if TYPE_CHECKING:
    from sizing.plan import ClassResult, Percentiles, Plan

CLASS_HEADERS = ["class", "targets", "TTFT p50/p95/p99 ms", "ITL p50/p95/p99 ms", "TPOT p50/p95/p99 ms",
                 "E2E p50/p95/p99 ms", "met"]


def _p(x: Percentiles) -> str:
    return f"{num(x.p50)} / {num(x.p95)} / {num(x.p99)}"


def targets_cell(c: ClassResult) -> str:
    if c.kind == "batch":
        return f"finish in {num(c.deadline_hours or 0)} h"
    return ", ".join(f"{t.metric.upper()} {t.percentile} ≤ {num(t.ms)}" for t in c.targets) or "none"


def met_cell(c: ClassResult) -> str:
    mark = "yes" if c.slo_met else "NO"
    if c.kind == "batch" and c.time_to_finish_hours is not None:
        return f"{mark} ({num(c.time_to_finish_hours)} h)"
    return mark


def class_rows(plan: Plan) -> list[list[str]]:
    return [[c.name, targets_cell(c), _p(c.ttft_ms), _p(c.itl_ms), _p(c.tpot_ms), _p(c.e2e_ms), met_cell(c)]
            for c in plan.classes]


def class_lines(plan: Plan) -> list[str]:
    """One line per class for narrow consoles."""
    return [f"{c.name}: {targets_cell(c)}; TTFT {_p(c.ttft_ms)}, ITL {_p(c.itl_ms)}, E2E {_p(c.e2e_ms)} ms "
            f"(p50/p95/p99); met: {met_cell(c)}" for c in plan.classes]


def _q(d: dict[str, float]) -> str:
    return " / ".join(num(d.get(q, 0.0)) for q in ("p50", "p95", "p99"))


def trace_lines(plan: Plan) -> list[str]:
    """What the trace says, before the plan's answer to it."""
    t = plan.trace
    if t is None:
        return []
    mix = ", ".join(f"{k} {v:.0%}" for k, v in t.class_mix.items())
    scale = f" (time scale {num(t.time_scale)})" if t.time_scale != 1 else ""
    return [f"trace {t.source}: {t.requests:,} requests over {num(t.span_s / 60)} min, mean "
            f"{num(t.mean_requests_per_s)}/s, busiest second {num(t.peak_requests_per_s_1s)}/s, busiest minute "
            f"{num(t.peak_requests_per_s_60s)}/s{scale}",
            f"trace lengths: prompt p50/p95/p99 {_q(t.prompt_tokens)}, output {_q(t.output_tokens)} tokens; "
            f"classes: {mix}",
            f"prefix reuse: {t.prefix_reuse_share:.0%} of prompt tokens repeat an earlier prefix (unbounded cache); "
            f"the planned replicas' caches served {t.prefix_hit_share_planned:.0%}"]


def fleet_lines(plan: Plan) -> list[str]:
    f = plan.fleet
    if f is None:
        return []
    out = [f"fleet: {f.replicas} replica(s), {f.layout} ({f.why}); routing {f.routing or 'n/a'}; {f.difference}",
           f"fleet search: {f.replays} replays"]
    if f.clipped_requests:
        out.append(f"fleet: {f.clipped_requests:,} requests longer than max_model_len were cut to it in the replay")
    if f.autoscaling_why:
        out.append(f"autoscaling: min {f.autoscaling_min_replicas}, max {f.autoscaling_max_replicas} replicas, "
                   f"{f.warm_standby_replicas} warm standby: {f.autoscaling_why}")
    return out
