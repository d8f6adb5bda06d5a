"""The plan's per-class results (`Plan.classes`), its trace summary (`Plan.trace`) and replayed fleet
(`Plan.fleet`), from the fleet search (sizing.planning.fleet) or, for a single-class stack without a
trace, from the pools' predicted percentiles at the planned load (the analytic model; a p90 target is
checked against the predicted p95, which is never below it)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sizing.plan import ClassAutoscaling, ClassResult, ClassTarget, FleetChoice, Percentiles, Plan, Pool, TraceSummary

if TYPE_CHECKING:
    import numpy as np

    from sizing.planning.fleet import FleetOutcome
    from sizing.spec import WorkloadSpec
    from sizing.stack import Stack
    from sizing.traffic.reader import Trace

METRICS = ("ttft", "itl", "tpot", "e2e")


def _pct(d: dict[str, float]) -> Percentiles:
    return Percentiles(p50=round(d["p50"], 3), p95=round(d["p95"], 3), p99=round(d["p99"], 3))


def _targets(ts: tuple[tuple[str, str, float], ...]) -> list[ClassTarget]:
    return [ClassTarget(metric=m, percentile=q, ms=v) for m, q, v in ts]


def _analytic_class(plan: Plan) -> ClassResult:
    """The single class, from the pools (the slowest pool's figure where a mix has two)."""
    w = plan.workload
    pred: dict[str, dict[str, float]] = {}
    for m in METRICS:
        d = {}
        for q in ("p50", "p95", "p99"):
            key = f"{m}_ms" if (m, q) == ("ttft", "mean") else f"{m}_{q}_ms"
            d[q] = max(float(getattr(p.per_replica, key)) for p in plan.pools)
        d["p90"] = d["p95"]
        pred[m] = d
    ts = w.slo.targets()
    met = all(pred[m][q] <= v for m, q, v in ts)
    rate = float(plan.demand.get("requests_per_s") or 0.0)
    return ClassResult(name="default", requests_per_s=round(rate, 4), targets=_targets(ts),
                       ttft_ms=_pct(pred["ttft"]), itl_ms=_pct(pred["itl"]), tpot_ms=_pct(pred["tpot"]),
                       e2e_ms=_pct(pred["e2e"]), slo_met=met, source="analytic model at the planned load",
                       replicas=sum(p.replicas_for_demand for p in plan.pools))


def attach(plan: Plan, stack: Stack, fleet: FleetOutcome | None, trace: Trace | None) -> Plan:
    """The plan with `classes` (always), `trace` and `fleet` (a trace or multi-class stack)."""
    w = stack.workload
    if fleet is None:
        return plan.model_copy(update={"classes": [_analytic_class(plan)]})
    by_name = {c.name: c for c in w.request_classes}
    classes = []
    for c in fleet.classes:
        ts = (by_name[c.name].slo.targets() if c.name in by_name and c.kind == "interactive" and w.classes
              else (() if c.kind == "batch" else w.slo.targets()))
        classes.append(ClassResult(
            name=c.name, kind=c.kind, requests_per_s=c.requests_per_s, targets=_targets(ts),
            ttft_ms=_pct(c.predicted["ttft_ms"]), itl_ms=_pct(c.predicted["itl_ms"]),
            tpot_ms=_pct(c.predicted["tpot_ms"]), e2e_ms=_pct(c.predicted["e2e_ms"]), slo_met=c.slo_met,
            source=("step-level simulation at saturation" if c.kind == "batch" else
                    f"replay over {c.replicas} replicas ({fleet.routing})"),
            replicas=c.replicas, deadline_hours=c.deadline_hours, time_to_finish_hours=c.time_to_finish_hours))
    if trace is not None and plan.api_comparison:  # the API's cache gets the share the fleet's caches served
        from sizing.cost.money import priced_row

        month = plan.totals.all_in_usd_per_month
        plan = plan.model_copy(update={"api_comparison": sorted(
            (priced_row(a, fleet.prefix_hit_share, month) for a in plan.api_comparison),
            key=lambda a: a.usd_per_month_same_traffic)})
    summary = None
    if trace is not None:
        from sizing.traffic.stats import trace_stats

        st = trace_stats(trace)
        summary = TraceSummary.model_validate({**st.as_dict(), "prefix_hit_share_planned": fleet.prefix_hit_share,
                                               "time_scale": w.trace.time_scale if w.trace else 1.0})
    diff = fleet.replicas - fleet.mean_based_replicas
    if summary is not None and summary.mean_requests_per_s:
        mean = summary.mean_requests_per_s
        why = (f"the trace's busiest minute is {summary.peak_requests_per_s_60s / mean:.1f}× its mean rate and its "
               f"busiest second {summary.peak_requests_per_s_1s / mean:.0f}×")
    elif trace is not None:
        why = ""
    else:
        why = "each class's own targets are checked on its own requests, not on the mix's mean"
    difference = ("the same as the mean-based plan" if diff == 0 else
                  f"{abs(diff)} replica(s) {'more' if diff > 0 else 'fewer'} than the mean-based plan "
                  f"({fleet.mean_based_replicas})"
                  + (f": {why}" if why else ""))
    if fleet.prefix_hit_share > 0:
        difference += f"; the replicas' prefix caches served {fleet.prefix_hit_share:.0%} of prompt tokens"
    auto = _autoscaling(plan.model_copy(update={"classes": classes}), fleet, trace)
    choice = FleetChoice.model_validate(dict(
        layout=fleet.layout, why=fleet.why, routing=fleet.routing, replicas=fleet.replicas,
        replicas_by_class=fleet.replicas_by_class, mean_based_replicas=fleet.mean_based_replicas,
        difference=difference, replays=fleet.replays, clipped_requests=fleet.clipped_requests, **auto))
    plan = plan.model_copy(update={"pools": _replayed_pools(plan.pools, classes, w)})
    class_pools = [p for p in plan.pools if p.request_class]
    if class_pools:
        choice.class_autoscaling = _class_autoscaling(plan, classes, trace)
        choice.default_class = next((p.request_class for p in class_pools if p.vllm.served_model_aliases), "") or ""
        choice.why += "; " + ", ".join(f"class {p.request_class} is served as model {p.vllm.served_model_name!r}"
                                       for p in class_pools)
        if choice.default_class:
            choice.why += f" (the plain name goes to {choice.default_class}'s pool: the stack's first class)"

    return plan.model_copy(update={"classes": classes, "trace": summary, "fleet": choice})


def _replayed_pools(pools: list[Pool], classes: list[ClassResult], w: WorkloadSpec) -> list[Pool]:
    """The pools with their predicted percentiles from the replay that sized them (the analytic estimate of
    one mean replica cannot see a long-prompt class's chunked prefills riding with the decodes, and may find
    no steady state where the replay finds one), so a pool's lines and its classes' lines agree:
    - a dedicated layout's class pool: its class's replay over exactly its replicas;
    - a pool serving every request class of the stack: on each metric, the class that sets the stack's
      tightest target on it (the pool's target line is that class's), else the slowest class;
    - a trace's pool keeps the analytic figures, except any not finite (an unstable mean estimate), which
      take the slowest class's: a plan's every figure is a number (a saved plan must read back).
    A mean (ttft_ms, itl_ms) that is not finite takes the replay's p50."""
    inter = [c for c in classes if c.kind == "interactive"]
    if not inter:
        return pools
    by_name = {c.name: c for c in inter}
    own = {c.name for c in w.classes or [] if not c.is_batch}

    def slowest(m: str) -> ClassResult:
        return max(inter, key=lambda c: getattr(c, f"{m}_ms").p95)

    def setter(m: str) -> ClassResult | None:
        from sizing.planning.class_shapes import tightest_class

        name = tightest_class(list(w.classes or []), m)
        return by_name.get(name) if name else None

    out = []
    for p in pools:
        r = p.per_replica
        cls = by_name.get(p.request_class or "")
        upd: dict[str, object] = {}
        for m in METRICS:
            src = cls or (setter(m) or slowest(m) if own else slowest(m))
            for q in ("p50", "p95", "p99"):
                key = f"{m}_{q}_ms"
                if cls is not None or own or not math.isfinite(float(getattr(r, key))):
                    upd[key] = getattr(getattr(src, f"{m}_ms"), q)
        for m in ("ttft", "itl"):
            if not math.isfinite(float(getattr(r, f"{m}_ms"))):
                upd[f"{m}_ms"] = upd.get(f"{m}_p50_ms", getattr(slowest(m), f"{m}_ms").p50)
        if cls is not None:
            upd["binds"] = (f"{r.binds} (one replica at the class's mean load, analytic); the replay of class "
                            f"{cls.name} over {cls.replicas} replicas {'meets' if cls.slo_met else 'misses'} its "
                            f"targets (TTFT p95 {cls.ttft_ms.p95:,.0f} ms)")
        out.append(p.model_copy(update={"per_replica": r.model_copy(update=upd)}) if upd else p)
    return out


def _autoscaling(plan: Plan, fleet: FleetOutcome, trace: Trace | None) -> dict[str, object]:
    """KEDA bounds of the whole fleet from the trace's load over time (_from_arrivals); {} without a trace."""
    if trace is None or trace.requests < 2 or not plan.pools:
        return {}
    pool = plan.pools[0]
    got = _from_arrivals(trace.arrival_s, fleet.replicas, max(pool.per_replica.cold_start_s, 1.0),
                         max(pool.replicas_max, fleet.replicas), _ttft_pairs(plan.classes))
    return {"autoscaling_min_replicas": got.min_replicas, "autoscaling_max_replicas": got.max_replicas,
            "warm_standby_replicas": got.warm_standby_replicas, "queue_threshold": got.queue_threshold,
            "autoscaling_why": got.why}


def _ttft_pairs(classes: list[ClassResult]) -> list[tuple[float, float]]:
    """(TTFT p95 target, replayed TTFT p95) of the classes, ms."""
    return [(t.ms, c.ttft_ms.p95) for c in classes for t in c.targets if (t.metric, t.percentile) == ("ttft", "p95")]


def _from_arrivals(a: np.ndarray, replicas: int, cold: float, most: int,
                   ttft: list[tuple[float, float]]) -> ClassAutoscaling:
    """KEDA bounds from arrivals over time (s): each replica carries the busiest minute's rate ÷ `replicas`;
    min = the quietest minute's need; max = `most` (the node group's); warm standby = the replicas the
    busiest rise of the per-minute rate within one cold start (`cold` s) needs beyond the quietest minute's.
    A queue of q requests delays a new one by about q ÷ the replica's rate at the busiest minute; the TTFT
    headroom the replay left (target p95 − replayed p95) bounds the queue that may stand."""
    import numpy as np

    from sizing.traffic.stats import peak_rate

    minute = np.searchsorted(a, a + 60.0, side="left") - np.arange(a.size)  # arrivals in the next 60 s
    per_replica = peak_rate(a, 60.0) / max(replicas, 1)  # requests/s one replica carried at the peak
    need = np.ceil(minute / 60.0 / max(per_replica, 1e-9) - 1e-9)
    lo = int(max(1, need.min()))
    ahead = np.searchsorted(a, a + cold, side="left")
    rise = float(max(float(need[min(j, a.size - 1)] - need[i]) for i, j in enumerate(ahead))) if a.size else 0.0
    warm = int(min(max(math.ceil(rise), 0), max(replicas - lo, 0)))
    mn = min(lo + warm, replicas)
    headroom_s = min((max(a_ - b, 0.0) for a_, b in ttft), default=0.0) / 1000.0
    q = int(max(1, math.floor(headroom_s * per_replica)))
    return ClassAutoscaling(
        min_replicas=mn, max_replicas=max(most, replicas), warm_standby_replicas=warm, queue_threshold=q,
        why=(f"quietest minute needs {lo} replica(s); the busiest rise within one cold start ({cold:.0f} s) needs "
             f"{warm} more, kept warm; max is the node group's; a queue of {q} per replica uses the TTFT headroom "
             "at the busiest minute's rate"))


def _class_autoscaling(plan: Plan, classes: list[ClassResult], trace: Trace | None) -> dict[str, ClassAutoscaling]:
    """A dedicated layout: each class pool's KEDA bounds from its own class's load. With a trace, from the
    class's arrivals (_from_arrivals, its replicas, its TTFT target); a class without one is a steady
    Poisson stream (the replay's), so min is its pool's replicas and the queue its TTFT headroom at its
    rate per replica; a batch class (no latency target) scales up when a whole batch (max_num_seqs) waits."""
    out: dict[str, ClassAutoscaling] = {}
    by = {c.name: c for c in classes}
    for pool in plan.pools:
        c = by.get(pool.request_class or "")
        if c is None:
            continue
        cold = max(pool.per_replica.cold_start_s, 1.0)
        n = max(pool.replicas_for_demand, 1)
        if c.kind == "batch":
            out[c.name] = ClassAutoscaling(
                min_replicas=pool.replicas, max_replicas=pool.replicas_max, queue_threshold=pool.vllm.max_num_seqs,
                why=f"a batch pool: its {pool.replicas} replicas finish by the deadline; it scales up when a whole "
                    f"batch ({pool.vllm.max_num_seqs} requests) waits per replica")
            continue
        if trace is not None and c.name in trace.class_names:
            k = trace.class_names.index(c.name)
            a = trace.arrival_s[trace.class_index == k]
            if a.size >= 2:
                out[c.name] = _from_arrivals(a, n, cold, pool.replicas_max, _ttft_pairs([c]))
                continue
        headroom_s = min((max(t - p, 0.0) for t, p in _ttft_pairs([c])), default=0.0) / 1000.0
        q = int(max(1, math.floor(headroom_s * c.requests_per_s / n)))
        out[c.name] = ClassAutoscaling(
            min_replicas=pool.replicas, max_replicas=pool.replicas_max, queue_threshold=q,
            why=(f"a steady stream of {c.requests_per_s:g} requests/s: min is the pool's {pool.replicas} replicas; a "
                 f"queue of {q} per replica uses the TTFT headroom at {c.requests_per_s / n:.3g} requests/s each"))
    return out
