"""The fleet from replayed traffic: for a trace stack or a stack with request classes, the smallest
number of replicas of a candidate whose every class meets its targets when the requests are replayed
over them (sizing.perf.replay), shared (classes mixed on one pool) or dedicated (a pool per class),
whichever needs fewer instances; batch classes get their own replicas, sized by throughput for their
deadline. The analytic search (sizing.planning.search) has already pruned the candidates and gives the
mean-based replica count the replay search starts from.

Classes without a trace are replayed as seeded Poisson streams at their rates with their lengths
(log-normal from mean and p95, as sizing.perf.sim samples them), SYNTH_REQUESTS requests in all.
The replay itself (sizing.perf.replay.replay) is handed in by the planner (`Replay`), as `search` is handed
its goodput function, which keeps the import chain flat (tests/test_layering.py).
Units: replicas, requests/s, ms, hours.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from sizing.perf.replica import ReplicaConfig
from sizing.perf.sim import Arrivals, Lengths, simulate
from sizing.planning.candidates import instances_for, replicas_with_spares
from sizing.planning.class_shapes import class_requests_per_s
from sizing.traffic.reader import Trace

if TYPE_CHECKING:
    from collections.abc import Callable

    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import ModelArch
    from sizing.perf.replay import ReplayResult
    from sizing.planning.candidates import Evaluated
    from sizing.planning.problem import PlanningProblem
    from sizing.spec import RequestClass, WorkloadSpec

SYNTH_REQUESTS = 2000  # requests synthesized for classes without a trace (bounds a replay's time)
MAX_REPLICAS = 512  # the replay search stops here (the candidate cannot meet the targets)
FINALISTS = 2  # cheapest tuned candidates whose fleet is replayed


@dataclass(frozen=True)
class ClassOutcome:
    name: str
    kind: str
    requests_per_s: float
    predicted: dict[str, dict[str, float]]  # metric_ms -> {p50, p90, p95, p99}
    slo_met: bool
    replicas: int
    deadline_hours: float | None = None
    time_to_finish_hours: float | None = None


@dataclass(frozen=True)
class FleetOutcome:
    layout: str
    why: str
    routing: str
    replicas: int
    replicas_by_class: dict[str, int]
    mean_based_replicas: int
    classes: list[ClassOutcome]
    replays: int
    replay_s_per_fleet: float
    search_s: float
    prefix_hit_share: float
    clipped_requests: int


def replica_config(model: ModelArch, ev: Evaluated, w: WorkloadSpec) -> ReplicaConfig:
    t = ev.tuning
    return ev.cand.with_fabric(ReplicaConfig(
        model=model, gpu=ev.cand.instance.gpu, precision=ev.cand.precision, tp=ev.cand.tp,
                         pp=ev.cand.pp, kv_cache_dtype=w.kv_cache_dtype, engine=w.single_engine,
                         interconnect=ev.cand.instance.gpu_interconnect,
                         max_num_seqs=t.max_num_seqs if t else None,
                         max_num_batched_tokens=t.max_num_batched_tokens if t else None))


def synthesize(classes: list[RequestClass], rates: list[float], seed: int = 0) -> Trace:
    """Poisson arrivals per interactive class at its rate (requests/s, sizing.planning.class_shapes
    class_requests_per_s: its own, its share of the stack's, or a closed loop's), merged."""
    rng = np.random.default_rng(seed)
    total = sum(rates)
    if total <= 0:
        raise ValueError("the classes' request rates add up to 0")
    span = SYNTH_REQUESTS / total
    parts = []
    for k, (c, r) in enumerate(zip(classes, rates, strict=True)):
        n = max(int(round(r * span)), 1)
        t = np.cumsum(rng.exponential(1.0 / max(r, 1e-9), n))
        p = Lengths(c.prompt_tokens.mean, c.prompt_tokens.p95).sample(rng, n, 10_000_000)
        o = Lengths(c.output_tokens.mean, c.output_tokens.p95).sample(rng, n, 10_000_000)
        parts.append((t, p, o, np.full(n, k, dtype=np.int64)))
    t = np.concatenate([x[0] for x in parts])
    order = np.argsort(t, kind="stable")
    cat_ = [np.concatenate([x[i] for x in parts])[order] for i in range(4)]
    return Trace(source="classes (Poisson)", arrival_s=cat_[0] - cat_[0][0], prompt_tokens=cat_[1],
                 output_tokens=cat_[2], class_names=tuple(c.name for c in classes), class_index=cat_[3],
                 prefix_ids=None, block_tokens=512)


def subset(trace: Trace, name: str) -> Trace:
    k = trace.class_names.index(name)
    m = trace.class_index == k
    ids = [x for x, keep in zip(trace.prefix_ids, m, strict=True) if keep] if trace.prefix_ids is not None else None
    return Trace(source=f"{trace.source} [{name}]", arrival_s=trace.arrival_s[m], prompt_tokens=trace.prompt_tokens[m],
                 output_tokens=trace.output_tokens[m], class_names=(name,),
                 class_index=np.zeros(int(m.sum()), dtype=np.int64), prefix_ids=ids, block_tokens=trace.block_tokens)


def meets(res: ReplayResult, targets: dict[str, tuple[tuple[str, str, float], ...]]) -> bool:
    if res.finished_share < 1.0:
        return False
    return all(res.per_class[name][f"{m}_ms"][q] <= v for name, ts in targets.items() for m, q, v in ts)


class ReplayCut(RuntimeError):
    """The plan's time budget (sizing.planning.time_budget) ran out during a fleet's replay search."""


class _Search:
    """The smallest N meeting the targets: from the mean-based count, down while it holds, else doubling
    up then bisecting."""

    def __init__(self, problem: PlanningProblem, cfg: ReplicaConfig, routing: str | None,
                 replay: Callable[[Catalog, ReplicaConfig, Trace, int, str | None], ReplayResult]) -> None:
        self.p, self.cfg, self.routing, self.replay = problem, cfg, routing, replay
        self.replays = 0
        self.seconds = 0.0

    def run(self, trace: Trace, n: int) -> ReplayResult:
        res = self.replay(self.p.catalog, self.cfg, trace, n, self.routing)
        self.replays += 1
        self.seconds += res.seconds
        return res

    def smallest(self, trace: Trace, targets: dict[str, tuple[tuple[str, str, float], ...]],
                 start: int) -> tuple[int, ReplayResult] | None:
        seen: dict[int, ReplayResult] = {}

        def ok(n: int) -> bool:
            if n not in seen:
                if self.p.time_budget.expired():
                    raise ReplayCut(f"{len(seen)} replays")
                seen[n] = self.run(trace, n)
            return meets(seen[n], targets)

        n = max(start, 1)
        if ok(n):
            # down by 1, 2, 4, ... while it holds (bursts rarely allow fewer than the mean, so usually one
            # replay), then bisect to the last step that failed: a mean-based count far above what a trace's
            # traffic needs (3,910 users set beside a light trace) took 2,764 replays one step at a time (issue 27)
            hi, step = n, 1
            while hi - step >= 1 and ok(hi - step):
                hi -= step
                step *= 2
            lo = max(hi - step, 0)  # failed there (0: below one replica)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if ok(mid):
                    hi = mid
                else:
                    lo = mid
        else:
            lo, hi = n, n * 2
            while not ok(hi):
                if hi >= MAX_REPLICAS:
                    return None
                lo, hi = hi, min(hi * 2, MAX_REPLICAS)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if ok(mid):
                    hi = mid
                else:
                    lo = mid
        return hi, seen[hi]


def batch_replicas(problem: PlanningProblem, cfg: ReplicaConfig, c: RequestClass) -> ClassOutcome:
    """A batch class's replicas: its requests over the deadline at one replica's saturated throughput
    (the step-level simulation with max_num_seqs requests always in flight)."""
    assert c.batch is not None
    eng = problem.catalog.engine(problem.workload.single_engine)
    seqs = int(cfg.max_num_seqs or eng.default_max_num_seqs)
    r = simulate(problem.catalog, cfg, Lengths(c.prompt_tokens.mean, c.prompt_tokens.p95),
                 Lengths(c.output_tokens.mean, c.output_tokens.p95), Arrivals.closed(seqs), seed=0)
    rps = max(r.requests_per_s, 1e-9)
    need = max(1, math.ceil(c.batch.requests / (c.batch.deadline_hours * 3600.0 * rps) - 1e-9))
    hours = c.batch.requests / (need * rps) / 3600.0
    pred = {m: dict(getattr(r, m)) for m in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")}
    return ClassOutcome(c.name, "batch", round(c.batch.requests / (c.batch.deadline_hours * 3600.0), 6), pred,
                        hours <= c.batch.deadline_hours, need, c.batch.deadline_hours, round(hours, 3))


def size_fleet(problem: PlanningProblem, ev: Evaluated, trace: Trace | None, routing: str | None,
               replay: Callable[[Catalog, ReplicaConfig, Trace, int, str | None], ReplayResult]) -> FleetOutcome | None:
    """The fleet of one candidate from replayed traffic; None when no count up to MAX_REPLICAS meets it."""
    t0 = time.perf_counter()
    w = problem.workload
    cfg = replica_config(problem.model, ev, w)
    classes = w.request_classes
    inter = [c for c in classes if not c.is_batch]
    batch = [c for c in classes if c.is_batch]
    s = _Search(problem, cfg, routing, replay)
    if trace is not None:
        slo = {n: w.slo.targets() for n in trace.class_names}
        reqs: Trace | None = trace
    else:
        slo = {c.name: c.slo.targets() for c in inter}
        reqs = synthesize(inter, [class_requests_per_s(w, c) for c in inter]) if inter else None
    out_classes: list[ClassOutcome] = []
    shared_n, layout, why, by_class = 0, "shared", "one class", {}
    best_res: ReplayResult | None = None
    if reqs is not None:
        start = max(ev.replicas_for_demand - sum(batch_replicas(problem, cfg, c).replicas for c in batch) if batch
                    else ev.replicas_for_demand, 1)
        found = s.smallest(reqs, slo, start)
        if found is None:
            return None
        shared_n, best_res = found
        layout, why = "shared", ("one class" if len(slo) == 1 else "")
        if len(slo) > 1:
            ded: dict[str, tuple[int, ReplayResult]] = {}
            for name in slo:
                sub = subset(reqs, name)
                got = s.smallest(sub, {name: slo[name]}, max(1, round(shared_n * sub.requests / reqs.requests)))
                if got is None:
                    break
                ded[name] = got
            ded_n = sum(n for n, _ in ded.values()) if len(ded) == len(slo) else None
            inst_shared = instances_for(ev.cand, shared_n)
            inst_ded = sum(instances_for(ev.cand, n) for n, _ in ded.values()) if ded_n else None
            if inst_ded is not None and inst_ded < inst_shared:
                layout = "dedicated"
                why = (f"a pool per class needs {inst_ded} instances ({ded_n} replicas), mixing the classes on one "
                       f"pool {inst_shared} ({shared_n}): mixed, the tightest class's targets bind the whole pool")
                by_class = {k: n for k, (n, _) in ded.items()}
            else:
                why = (f"mixing the classes on one pool needs {inst_shared} instances ({shared_n} replicas)"
                       + (f", a pool per class {inst_ded} ({ded_n})" if inst_ded is not None else "")
                       + ": one pool absorbs each class's bursts with the other's spare capacity")
        for k, name in enumerate(reqs.class_names):
            res = best_res if layout == "shared" else ded[name][1]
            rate = float((reqs.class_index == k).sum()) / max(float(reqs.arrival_s[-1]), 1e-9)
            n_c = shared_n if layout == "shared" else by_class[name]
            out_classes.append(ClassOutcome(name, "interactive", round(rate, 4), res.per_class[name],
                                            meets(res, {name: slo[name]}), n_c))
    b_out = [batch_replicas(problem, cfg, c) for c in batch]
    out_classes += b_out
    serving = (shared_n if layout == "shared" else sum(by_class.values())) + sum(b.replicas for b in b_out)
    if layout == "dedicated":  # each batch class's replicas are its own pool too
        by_class = {**by_class, **{b.name: b.replicas for b in b_out}}
    if b_out:
        why = (why + "; " if why else "") + "each batch class has its own replicas, sized for its deadline"
    return FleetOutcome(layout=layout, why=why or "one class", routing=best_res.routing if best_res else "",
                        replicas=serving, replicas_by_class=by_class if layout == "dedicated" else {},
                        mean_based_replicas=ev.replicas_for_demand, classes=out_classes, replays=s.replays,
                        replay_s_per_fleet=round(s.seconds / max(s.replays, 1), 3),
                        search_s=round(time.perf_counter() - t0, 3),
                        prefix_hit_share=best_res.prefix_hit_share if best_res else 0.0,
                        clipped_requests=best_res.clipped_requests if best_res else 0)


def resize(problem: PlanningProblem, ev: Evaluated, replicas_for_demand: int) -> Evaluated:
    """The candidate with its replica count (and instances, cost) set from the replay."""
    replicas = replicas_with_spares(ev.cand, replicas_for_demand, problem.hardware.redundancy)
    instances = instances_for(ev.cand, replicas)
    return replace(ev, replicas_for_demand=replicas_for_demand, replicas=replicas, instances=instances,
                   usd_per_hour=instances * ev.usd_per_instance_hour)


def replayed_finalists(problem: PlanningProblem, feasible: list[Evaluated],
                       cost_key: Callable[[Evaluated], tuple[float, ...]], trace: Trace | None,
                       routing: str | None,
                       replay: Callable[[Catalog, ReplicaConfig, Trace, int, str | None], ReplayResult],
                       ) -> tuple[list[Evaluated], FleetOutcome | None]:
    """The cheapest FINALISTS candidates resized by their replayed fleets, cheapest first, with the winner's
    outcome. Only replayed candidates stay (an unreplayed one's mean-based count would look cheaper than
    it is); when no finalist's replay meets the targets up to MAX_REPLICAS, the analytic ranking stays."""
    ranked = sorted(feasible, key=cost_key)
    out: list[tuple[Evaluated, FleetOutcome]] = []
    for ev in ranked[:FINALISTS]:
        try:
            fo = size_fleet(problem, ev, trace, routing, replay)
        except ReplayCut:
            problem.time_budget.skipped(f"the replay of finalist {ev.cand.label()} (its analytic count kept)")
            continue
        if fo is not None:
            out.append((resize(problem, ev, fo.replicas), fo))
    if not out:
        return ranked, None
    out.sort(key=lambda x: cost_key(x[0]))
    return [e for e, _ in out], out[0][1]
