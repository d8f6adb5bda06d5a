"""The planner's batching flags: per finalist candidate, the vLLM `max_num_batched_tokens` (the
chunked-prefill token budget) and `max_num_seqs` that maximize goodput at the SLO, checked by the
step-level simulation (sizing.perf.sim), and what binds there.

Method: the analytic model (sizing.perf.load, microseconds per estimate) sizes every candidate with the
engine's default flags and prunes; the finalists (the FINALISTS cheapest feasible ones, the cheapest of
each instance family, and the cheapest of each GPU type whose cost with the grid's best flags is within
FINALIST_COST_WINDOW of the best such cost: tune_finalists) get a grid search over BUDGETS ×
max_num_seqs (analytic goodput at each point), then the best point's goodput load is simulated step by
step: if the simulation misses a target there, the load steps down a fixed lattice of loads
(LATTICE_RATIO apart, the same lattice for every SLO) to the first one that meets every target (at most
SIM_TRIES simulations; the scan starts at the lattice point at or above the analytic load). The goodput
is the smaller of the analytic load and that lattice load, so a looser target never yields less for one
finalist: its analytic load is no smaller, its scan starts no lower on the same lattice, and every load
that meets the tighter target meets the looser one (a bisection would not be exact: the simulated
percentiles are not monotone in the load). Between the lattice load that met and the one above it that
missed, the loads at which the demand needs one replica fewer (users ÷ k, or requests/s ÷ k, per replica)
are simulated too, largest first (DEMAND_TRIES at most): a lattice that steps 91 → 108 users would
otherwise never try the 100 a user asked for and plan a second replica that its own estimate does not need
(issue 31 item 5). The same lattice and the same demand points for every SLO keep the rule exact. The
finalists are re-sized on that goodput and re-ranked by cost.

Why a budget matters: vLLM V1 schedules running decodes first and fills the rest of
max_num_batched_tokens with prompt chunks (vllm/v1/core/sched/scheduler.py, see
sizing/perf/sim.py), so a large budget lets one step carry a whole long prompt, which stretches
every running request's inter-token gap in that step (the ITL tail); a small budget spreads
prefill over more steps, which delays first tokens (TTFT) and costs a weight read per step.
Units: ms for latencies, output tokens/s and requests/s per replica.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from sizing.perf.binding import target_label
from sizing.perf.goodput import goodput
from sizing.perf.load import Goodput, WorkloadShape, _engine_limits, estimate_closed_loop
from sizing.perf.replica import ReplicaConfig
from sizing.planning.candidates import Evaluated, Tuning, resize, strategy_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import ModelArch
    from sizing.planning.demand import Demand
    from sizing.planning.problem import PlanningProblem
    from sizing.spec import WorkloadSpec

# chunked-prefill budgets searched (tokens per step); vLLM's default for online serving is 8192
# (sizing/data/engines.csv). Each must be ≥ max_num_seqs for decodes to fit: smaller ones are skipped.
BUDGETS = (512, 1024, 2048, 4096, 8192, 16384)
COARSE = (512, 2048, 8192)  # evaluated first; the best one's neighbours in BUDGETS next
SEQS_FRACTIONS = (1.0, 0.5, 0.25)  # max_num_seqs as a share of the engine default
FINALISTS = 2  # cheapest feasible candidates that are tuned and simulated
# ... plus the cheapest of each GPU type within this factor of the best grid-tuned analytic cost: tuning gains
# differ by GPU (dev at ITL 138 ms: 2 x g6e.xlarge $3.72/h while the T4s, left untuned, met 114 ms at $3.16/h)
FINALIST_COST_WINDOW = 1.5  # on the grid-tuned analytic cost
SIM_TRIES = 4  # simulations per finalist at most on the lattice
DEMAND_TRIES = 2  # ... plus at most this many at the demand's own per-replica loads between two lattice points
LATTICE_RATIO = 2 ** 0.25  # loads the simulation checks: requests/s 2^(k/4); users ceil(2^(k/4)), distinct
SIM_SEED = 0
MIN_GAIN = 0.01  # a grid point replaces the default flags only when its goodput is this much higher


def _cfg(model: ModelArch, ev: Evaluated, w: WorkloadSpec, budget: int | None = None,
         seqs: int | None = None) -> ReplicaConfig:
    return ev.cand.with_fabric(ReplicaConfig(
        model=model, gpu=ev.cand.instance.gpu, precision=ev.cand.precision, tp=ev.cand.tp,
                         pp=ev.cand.pp, kv_cache_dtype=w.kv_cache_dtype, engine=w.single_engine,
                         interconnect=ev.cand.instance.gpu_interconnect, max_num_seqs=seqs,
                         max_num_batched_tokens=budget))


def _grid(cat: Catalog, model: ModelArch, ev: Evaluated, w: WorkloadSpec, mode: str) -> tuple[int, int, Goodput]:
    """(budget, max_num_seqs, analytic goodput) of the best point; the default wins unless beaten by
    MIN_GAIN. Coarse to fine: every other budget first (COARSE), then the neighbours of the best;
    max_num_seqs below the default only in open loop (a closed loop's concurrency is the load itself,
    so a lower cap can only cut its goodput)."""
    seqs0, budget0, _ = _engine_limits(cat, _cfg(model, ev, w))
    shape = WorkloadShape.from_spec(w)
    targets = w.slo.targets()
    seen: dict[tuple[int, int], Goodput] = {(budget0, seqs0): ev.gp}

    def at(budget: int, seqs: int) -> Goodput:
        if (budget, seqs) not in seen:
            seen[(budget, seqs)] = goodput(cat, _cfg(model, ev, w, budget, seqs), shape, w.slo.bound_ms("ttft", "p95"),
                                           w.slo.bound_ms("itl", "p95"), mode=mode, targets=targets)
        return seen[(budget, seqs)]

    def score(key: tuple[int, int]) -> float:
        g = seen[key]
        bonus = 1.0 + MIN_GAIN if key == (budget0, seqs0) else 1.0
        return g.output_tokens_per_s * bonus if g.feasible else -1.0

    for frac in (SEQS_FRACTIONS if mode == "open" else (1.0,)):
        seqs = max(1, int(seqs0 * frac))
        for budget in COARSE:
            if budget >= seqs:
                at(budget, seqs)
    best = max(seen, key=score)
    i = BUDGETS.index(best[0]) if best[0] in BUDGETS else -1
    for j in (i - 1, i + 1) if i >= 0 else ():
        if 0 <= j < len(BUDGETS) and BUDGETS[j] >= best[1]:
            at(BUDGETS[j], best[1])
    best = max(seen, key=score)
    return best[0], best[1], seen[best]


def grid_tuned(cat: Catalog, model: ModelArch, ev: Evaluated, w: WorkloadSpec, mode: str,
               memo: dict[ReplicaConfig, Goodput]) -> Evaluated:
    """`ev` with the goodput of its batching flags tuned on the analytic grid (_grid: what the planner's
    finalists start from, without their simulation), memoised in `memo` per replica config (instance sizes
    of one GPU, precision and parallelism share it). A mix of request classes keeps the default flags, as
    the planner does (tune_finalists). The sweeps of `llmcap compare` size from this: on default flags they
    priced a 1,000-user A100 at $160,291/month where the plan, tuned, takes $100,182."""
    from sizing.planning.class_shapes import interactive_classes

    if len(interactive_classes(w)) >= 2:
        return ev
    key = _cfg(model, ev, w)
    if key not in memo:
        memo[key] = _grid(cat, model, ev, w, mode)[2]
    return replace(ev, gp=memo[key])


def _meets(r: object, targets: tuple[tuple[str, str, float], ...]) -> bool:
    return bool(getattr(r, "stable", False)) and all(r.percentile(m, q) <= v for m, q, v in targets)  # type: ignore[attr-defined]


def _missed(r: object, targets: tuple[tuple[str, str, float], ...]) -> tuple[str, str, float, float]:
    m, q, v = max(targets, key=lambda t: r.percentile(t[0], t[1]) / t[2])  # type: ignore[attr-defined]
    return m, q, v, float(r.percentile(m, q))  # type: ignore[attr-defined]


def _lattice_down(load: float, integer: bool) -> list[float]:
    """The loads a simulation tries, largest first: the lattice point at or above `load`, then the
    next ones below it, SIM_TRIES at most. The lattice (LATTICE_RATIO^k requests/s, or the distinct
    ceilings of those as users, down to 1) does not depend on the SLO, which makes the rule exact."""
    k = math.ceil(math.log(max(load, 1e-12)) / math.log(LATTICE_RATIO) - 1e-9)
    while integer and k > 0 and math.ceil(LATTICE_RATIO ** (k - 1) - 1e-9) >= load:
        k -= 1  # the ceiling of a lower lattice point already reaches `load`
    out: list[float] = []
    while len(out) < SIM_TRIES:
        x = LATTICE_RATIO ** k
        k -= 1
        if integer:
            x = float(max(1, math.ceil(x - 1e-9)))
            if out and x >= out[-1]:
                if x <= 1.0:
                    break
                continue
        out.append(x)
    return out


def demand_points(demand_load: float | None, met: float, missed: float, integer: bool) -> list[float]:
    """Per-replica loads strictly between the lattice load that met and the one above it that missed at
    which the demand (`demand_load`: users, or requests/s) needs k replicas, k = 1, 2, ...: largest first,
    DEMAND_TRIES at most. Empty without a demand."""
    if not demand_load or demand_load <= met:
        return []
    out: list[float] = []
    k = max(1, math.floor(demand_load / missed))
    while len(out) < DEMAND_TRIES:
        x = float(math.ceil(demand_load / k - 1e-9)) if integer else demand_load / k
        if x <= met:
            break
        if x < missed and (not out or x < out[-1]):
            out.append(x)
        k += 1
    return out


def simulated_goodput(cat: Catalog, cfg: ReplicaConfig, w: WorkloadSpec, mode: str, gp: Goodput,
                      budget_note: str, demand_load: float | None = None,
                      stop: Callable[[], bool] | None = None) -> tuple[Goodput, str, str, dict[str, float]]:
    """Check the analytic goodput load with the simulation, backing off until every target holds.
    `demand_load` (users in closed loop, requests/s in open loop): the demand, whose own per-replica loads
    between the lattice points are tried too (demand_points). Returns (goodput, binds line, bound code,
    predicted percentiles at that load). `stop`: passed to every simulation (sizing.perf.sim.SimulationStopped
    when it answers True)."""
    from sizing.perf.sim import Arrivals, Lengths, simulate

    targets = w.slo.targets()
    prompt = Lengths(w.prompt_tokens.mean, w.prompt_tokens.p95)
    output = Lengths(w.output_tokens.mean, w.output_tokens.p95)
    analytic = max(1.0, float(int(gp.concurrency))) if mode == "closed" else gp.requests_per_s
    loads = _lattice_down(analytic, mode == "closed")
    failed: tuple[float, tuple[str, str, float, float]] | None = None
    for load in loads:
        arr = Arrivals.closed(int(load)) if mode == "closed" else Arrivals.poisson(load)
        r = simulate(cat, cfg, prompt, output, arr, w.prefix_cache_hit_rate, seed=SIM_SEED, stop=stop)
        if _meets(r, targets) and failed is not None:
            # the demand's own loads in the gap to the lattice load that missed, largest first
            for x in demand_points(demand_load, load, failed[0], mode == "closed"):
                if x > analytic:
                    continue
                rx = simulate(cat, cfg, prompt, output, Arrivals.closed(int(x)) if mode == "closed"
                              else Arrivals.poisson(x), w.prefix_cache_hit_rate, seed=SIM_SEED, stop=stop)
                if _meets(rx, targets):
                    load, r = x, rx
                    break
        if _meets(r, targets):
            pred = {f"{m}_{q}_ms": round(r.percentile(m, q), 3) for m in ("ttft", "itl", "tpot", "e2e")
                    for q in ("p50", "p95", "p99")}
            # a lattice load above the analytic one met: size at the analytic one. Throughput comes from the
            # analytic estimate (closed loop) or the rate itself (open loop), so that it only grows with the
            # load; the simulation checks the targets (its own throughput over a finite run is not monotone)
            sized = min(load, analytic)
            at = estimate_closed_loop(cat, cfg, WorkloadShape.from_spec(w), max(1, int(sized))) \
                if mode == "closed" else gp.at
            if at is not None and mode == "closed":
                tokens, rps, conc = at.output_tokens_per_s, at.requests_per_s, float(max(1, int(sized)))
            else:
                tokens, rps, conc = sized * w.output_tokens.mean, sized, r.mean_running * sized / load
            what = f"{int(load)} concurrent requests" if mode == "closed" else f"{load:.2f} req/s"
            if sized < load:
                what += f", sized at the analytic {int(sized)}" if mode == "closed" else f", sized at {sized:.2f}"
            if failed is None:
                return (replace(gp, output_tokens_per_s=tokens, requests_per_s=rps, concurrency=conc, at=at),
                        f"simulated at {what}: {w.slo.describe()} met ({budget_note})", "", pred)
            fl, (m, q, v, got) = failed
            more = f"{int(fl)} concurrent requests" if mode == "closed" else f"{fl:.2f} req/s"
            code = "ttft-queueing" if m == "ttft" else "itl-tail"
            why = "prefill chunks in the decode steps" if code == "itl-tail" else "queueing for prefill"
            return (replace(gp, output_tokens_per_s=tokens, requests_per_s=rps, concurrency=conc, at=at),
                    f"{target_label(m, q)} ({why}): simulated {m.upper()} {q} {got:.1f} ms at {more} > {v:g} ms "
                    f"target, met at {what} ({budget_note})", code, pred)
        failed = (load, _missed(r, targets))
    # the simulation misses at every load tried: keep the smallest load tried as the goodput, said so
    load = min(loads[-1], analytic)
    fl, (m, q, v, got) = failed if failed else (load, ("itl", "p95", 0.0, 0.0))
    scale = min(1.0, load / (gp.concurrency if mode == "closed" else max(gp.requests_per_s, 1e-12)))
    code = "ttft-queueing" if m == "ttft" else "itl-tail"
    return (replace(gp, output_tokens_per_s=gp.output_tokens_per_s * scale, requests_per_s=gp.requests_per_s * scale,
                    concurrency=max(1.0, gp.concurrency * scale)),
            f"{target_label(m, q)}: simulated {m.upper()} {q} {got:.1f} ms > {v:g} ms target even at the smallest load "
            f"tried; sized at it ({budget_note})", code, {})


def grid_selection(feasible: list[Evaluated], cost_key: object) -> tuple[list[int], dict[tuple[str, int], int]]:
    """Which of `feasible` the planner tunes (tune_finalists): (the FINALISTS cheapest by `cost_key` and the
    cheapest of each instance family; the cheapest of each GPU type and tensor parallelism), as indices into
    `feasible`."""
    ranked = sorted(range(len(feasible)), key=lambda i: cost_key(feasible[i]))  # type: ignore[operator]
    chosen = list(ranked[:FINALISTS])
    for family in ("scale-up", "scale-out"):
        best = next((i for i in ranked if strategy_of(feasible[i].cand.instance) == family), None)
        if best is not None and best not in chosen:
            chosen.append(best)
    # and the cheapest of each GPU type whose cost with its flags tuned on the analytic grid (ms each, no
    # simulation) is near the best such cost: tuning gains differ by GPU by up to 2x (dev at 755 users: the
    # H100's default-flags cost is 1.8x the L40S's, its tuned one 0.8x)
    # (every GPU type and parallelism is gridded, ms each: a window of 3x the cheapest default-flags cost
    # left out an A100 TP2 whose default flags cost 4x its tuned ones at 1,000 users and a 50 ms ITL target
    # (a prefill-carrying step above the target), so that target planned $100,182/month where 40 ms
    # planned $60,109; tests/test_plan_slo_monotone.py)
    # (per GPU type and tensor parallelism: the tuning gain differs by parallelism too, so the cheapest of a GPU
    # type on default flags is not always its cheapest tuned; prod at 1,000 users: the H100's cheapest on
    # default flags was TP4 on p5.48xlarge, $120,538/month, its TP1 on p5.4xlarge $145,650 on default flags and
    # $40,179 tuned, and the plan went to L40S at $73,361; tests/test_planner.py)
    first: dict[tuple[str, int], int] = {}
    for i in ranked:
        first.setdefault((feasible[i].cand.instance.gpu, feasible[i].cand.tp), i)
    return chosen, first


def tune_finalists(p: PlanningProblem, feasible: list[Evaluated], cost_key: object) -> list[Evaluated]:
    """`feasible` with its finalists replaced by their tuned, simulated versions: the FINALISTS cheapest (by
    `cost_key`), and the cheapest of each instance family (scale-up, scale-out) when it is not among them.
    Tuning gains differ by family (an H100's budget and batch gain more than an L40S's), so ranking the
    families on default flags alone let a load whose analytic ranking kept the H100 out plan dearer than a
    slightly heavier load that let it in (dev: 755 users 41 x g6e.xlarge $76.30/h, 775 users 9 x p5.4xlarge
    $61.92/h; tests/test_planner.py). At most one simulation more per plan."""
    from sizing.planning.class_shapes import interactive_classes

    if len(interactive_classes(p.workload)) >= 2:
        # request classes: the flags are tuned and goodput simulated for one workload shape, and a mix of
        # classes has none (sizing.planning.class_shapes); the replay (sizing.planning.fleet) sizes each
        # finalist at the engine's default flags on the classes' own requests
        return feasible
    chosen, first = grid_selection(feasible, cost_key)
    from sizing.perf.sim import SimulationStopped

    grids: dict[int, tuple[int, int, Goodput]] = {}
    budget = p.time_budget
    for i in first.values():
        if budget.expired():
            budget.skipped(f"batching-flag grid of {feasible[i].cand.label()}")
            continue
        grids[i] = _grid(p.catalog, p.model, feasible[i], p.workload, p.demand.mode)
    grid_cost = {i: resize(replace(feasible[i], gp=grids[i][2]), p.demand, p.hardware.redundancy,
                           feasible[i].goodput_scale).usd_per_hour for i in first.values() if i in grids}
    if grid_cost:
        ceiling = min(grid_cost.values()) * FINALIST_COST_WINDOW
        chosen += [i for i in first.values() if i not in chosen and grid_cost[i] <= ceiling]
    out = list(feasible)
    tuned: dict[object, Evaluated] = {}
    for i in chosen:
        if budget.expired():
            budget.skipped(f"simulation of finalist {feasible[i].cand.label()} (analytic goodput kept)")
            continue
        try:
            out[i] = tune(p.catalog, p.model, p.workload, p.demand, feasible[i], p.hardware.redundancy, grids.get(i),
                          stop=budget.expired)
        except SimulationStopped:
            budget.skipped(f"simulation of finalist {feasible[i].cand.label()} (analytic goodput kept)")
            continue
        tuned.setdefault(_cfg(p.model, feasible[i], p.workload), out[i])
    # a candidate whose replica is the same as a tuned one's (same GPU, precision and parallelism on another
    # instance size) serves the same: it gets the same flags and simulated goodput, so that a purchase split
    # or a mix that lands on the other instance size does not fall back to the default flags
    for j, ev in enumerate(feasible):
        t = tuned.get(_cfg(p.model, ev, p.workload)) if j not in chosen else None
        if t is not None:
            out[j] = resize(replace(ev, gp=t.gp, tuning=t.tuning), p.demand, p.hardware.redundancy, ev.goodput_scale)
    return out


def tune(cat: Catalog, model: ModelArch, w: WorkloadSpec, demand: Demand, ev: Evaluated,
         redundancy: int, grid: tuple[int, int, Goodput] | None = None,
         stop: Callable[[], bool] | None = None) -> Evaluated:
    """One finalist with its batching flags chosen and its goodput simulated, re-sized for the demand.
    `grid`: its _grid result when already known; `stop`: the time budget's check (simulated_goodput)."""
    budget, seqs, g = grid or _grid(cat, model, ev, w, demand.mode)
    _, budget0, _ = _engine_limits(cat, _cfg(model, ev, w))
    cfg = _cfg(model, ev, w, budget, seqs)
    note = (f"max_num_batched_tokens {budget:,} and max_num_seqs {seqs:,} chosen from budgets "
            f"{BUDGETS[0]:,}–{BUDGETS[-1]:,}; the default {budget0:,} gives {ev.gp.output_tokens_per_s:,.0f} tok/s "
            f"analytic, {g.output_tokens_per_s:,.0f} at the choice")
    sim_gp, binds, code, pred = simulated_goodput(
        cat, cfg, w, demand.mode, g, note,
        float(demand.concurrent_users or 0) if demand.mode == "closed" else demand.requests_per_s, stop)
    lo, hi = cat.calibration.goodput_range
    sim_gp = replace(sim_gp, output_tokens_per_s_p10=sim_gp.output_tokens_per_s * lo,
                     output_tokens_per_s_p90=sim_gp.output_tokens_per_s * hi)
    t = Tuning(max_num_batched_tokens=budget, max_num_seqs=seqs, default_budget=budget0,
               budgets=(BUDGETS[0], BUDGETS[-1]),
               analytic_output_tokens_per_s=g.output_tokens_per_s, simulated=True, binds=binds, bound_code=code,
               predicted=pred)
    return resize(replace(ev, gp=sim_gp, tuning=t), demand, redundancy, ev.goodput_scale)
