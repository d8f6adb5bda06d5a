"""Sweeps of one workload variable across deployment options: each option priced at every swept
value, with the crossovers where the cheaper of two options changes and the edges where an option
starts or stops having a plan that meets the SLO. The results are the `sweep` part of the versioned
comparison document (sizing.analysis.comparison: `Sweep`, its points, crossovers and edges) that every
compare view and the plot read.

Owns: the sweep spec (`--sweep VAR=LO..HI`), pricing per point, crossovers, feasibility edges, the
cheapest hosted API. Must not import matplotlib, pulumi or boto3.

Sweeps do not re-plan each point. For `users` and `rate` the goodput of a candidate does not depend
on the demand, so each option's candidates are searched once and re-sized per point
(sizing.planning.candidates.resize). For `itl_ms` and `prompt_tokens` goodput changes, so candidates are
evaluated per point through a memoised goodput: instance types with the same GPUs, precision and
parallelism share one evaluation per (config, request shape, SLO).

Units: $/hour and $/month (730 h) for the whole deployment of an option (every pool, GPU instances
only); $ per 1M output tokens at the planned load of that point.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sizing.analysis.comparison import NO_PLAN, CheapestApi, Crossover, FeasibilityEdge, Option, Sweep, SweepPoint
from sizing.cost.money import api_comparison, input_usd_per_mtok, usd_per_million_tokens, usd_per_month
from sizing.errors import SpecError
from sizing.perf.goodput import goodput
from sizing.perf.load import Goodput
from sizing.perf.overlay import default_goodput_scale
from sizing.planning.batching import grid_tuned
from sizing.planning.candidates import Candidate, Evaluated, enumerate_candidates, instances_for, resize, size_replicas
from sizing.planning.demand import Demand, demand_of
from sizing.planning.mix import TOP_K, best_mix
from sizing.planning.problem import PlanningProblem
from sizing.planning.search import GoodputScale, evaluate, search
from sizing.spec import WorkloadSpec

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import ModelArch
    from sizing.plan import Rejection
    from sizing.stack import Stack

SWEEP_VARS = {
    "users": "concurrent users",
    "rate": "peak requests/s",
    "prompt_tokens": "prompt tokens (mean)",
    "itl_ms": "ITL p95 target (ms)",
}
INTEGER_VARS = ("users", "prompt_tokens")
DEFAULT_POINTS = 60
MAX_POINTS = 2000





# ---------------------------------------------------------------- the spec


@dataclass(frozen=True)
class SweepSpec:
    var: str
    values: tuple[float, ...]
    log: bool  # log-spaced (the plot uses a log x axis)


_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_SPEC = re.compile(rf"^([a-z_]+)={_NUM}\.\.{_NUM}(?:(:)([0-9]+)|(/){_NUM})?$")


def parse_sweep(text: str) -> SweepSpec:
    """`VAR=LO..HI` (log-spaced, 60 points), `VAR=LO..HI:N` (N log-spaced points) or `VAR=LO..HI/STEP`."""
    m = _SPEC.match(text.replace(" ", ""))
    usage = f"--sweep {text!r}: expected VAR=LO..HI[:POINTS|/STEP] with VAR one of {', '.join(SWEEP_VARS)}, " \
            "e.g. users=10..2000 or itl_ms=10..60/1"
    if not m:
        raise SpecError(usage)
    var, lo, hi = m.group(1), float(m.group(2)), float(m.group(3))
    if var not in SWEEP_VARS:
        raise SpecError(f"--sweep: unknown variable {var!r}; use one of {', '.join(SWEEP_VARS)}")
    if not (0 < lo < hi):
        raise SpecError(f"--sweep {text!r}: need 0 < LO < HI")
    if m.group(6):
        step = float(m.group(7))
        if step <= 0:
            raise SpecError(f"--sweep {text!r}: STEP must be positive")
        n_points = int(math.floor((hi - lo) / step + 1e-9)) + 1
        if n_points > MAX_POINTS:
            raise SpecError(f"--sweep {text!r}: {n_points} points; at most {MAX_POINTS}")
        vals = [lo + i * step for i in range(n_points)]
        log = False
    else:
        n_points = int(m.group(5)) if m.group(4) else DEFAULT_POINTS
        if not 2 <= n_points <= MAX_POINTS:
            raise SpecError(f"--sweep {text!r}: POINTS must be 2..{MAX_POINTS}")
        vals = [lo * (hi / lo) ** (i / (n_points - 1)) for i in range(n_points)]
        log = True
    if var in INTEGER_VARS:
        vals = [float(round(v)) for v in vals]
    return SweepSpec(var, tuple(sorted({round(v, 6) for v in vals})), log)


def with_value(w: WorkloadSpec, var: str, x: float) -> WorkloadSpec:
    """The workload with one variable set (validated, so a swept value can be rejected like a stack's)."""
    d = w.model_dump(mode="json")
    tps = d["traffic"].get("tokens_per_s_per_user")
    if var == "users":
        d["traffic"] = {"concurrent_users": int(round(x)), "tokens_per_s_per_user": tps}
    elif var == "rate":
        d["traffic"] = {"peak_requests_per_s": x, "tokens_per_s_per_user": tps}
    elif var == "prompt_tokens":
        d["prompt_tokens"] = int(round(x))
        d["max_context_tokens"] = None
    elif var == "itl_ms":
        d["slo"] = {**d["slo"], "itl": {"p95": x}}  # the swept ITL p95 replaces the stack's ITL targets
    else:
        raise SpecError(f"--sweep: unknown variable {var!r}")
    return WorkloadSpec.model_validate(d)


def priced_point(x: float, usd_per_hour: float | None, usd_per_million_output_tokens: float | None = None,
                 gpus: int = 0, deployment: str = NO_PLAN) -> SweepPoint:
    """A point from unrounded figures ($/hour of the whole deployment; None: infeasible): the document's
    rounded fields, and the unrounded $/hour the crossover search compares."""
    if usd_per_hour is None:
        return SweepPoint(x=x, usd_per_hour=None, usd_per_month=None, usd_per_million_output_tokens=None, gpus=gpus,
                          deployment=deployment)
    p = SweepPoint(x=x, usd_per_hour=round(usd_per_hour, 4), usd_per_month=round(usd_per_month(usd_per_hour), 2),
                   usd_per_million_output_tokens=None if usd_per_million_output_tokens is None
                   else round(usd_per_million_output_tokens, 4), gpus=gpus, deployment=deployment)
    p.set_exact_usd_per_hour(usd_per_hour)
    return p


# ---------------------------------------------------------------- pricing one option per point


_INFEASIBLE = "infeasible"
# which direction of each per-point variable loosens the SLO problem (more goodput per replica)
_LOOSER = {"itl_ms": 1, "prompt_tokens": -1}


def _perf_key(c: Candidate) -> tuple[Any, ...]:
    """Candidates with the same key have the same goodput and fit (they differ in price and packing)."""
    i = c.instance
    return (i.gpu, c.precision, c.tp, c.pp, i.gpu_interconnect, i.gpu_memory_gib_each)


def _instances_per_replica(c: Candidate) -> float:
    """Instances one replica occupies: its pipeline stages, or a share of an instance it shares."""
    return c.pp if c.pp > 1 else 1.0 / c.replicas_per_instance


def _rank(e: Evaluated, mixed: bool) -> float:
    """What the search minimises: $/hour; for mixed, the cost-efficiency sizing.planning.mix ranks by."""
    if not mixed:
        return e.usd_per_hour
    return e.usd_per_instance_hour * e.replicas_for_demand * _instances_per_replica(e.cand)


class _Prepared:
    """One option ready to be priced at any value of the swept variable.

    users/rate: candidates searched once, re-sized per point. itl_ms/prompt_tokens: per point, every
    candidate gets a lower bound on its cost from its exact goodput at the nearest *looser* value
    already evaluated (goodput only grows as ITL loosens or prompts shorten; infeasible there means
    infeasible here); candidates are then evaluated exactly in bound order until no remaining bound
    can beat the best (mixed: the TOP_K best) exact one. Goodput is memoised per config and SLO."""

    def __init__(self, option: Option, cat: Catalog, var: str, x0: float, scale: GoodputScale | None,
                 memo: dict[tuple[Any, ...], Goodput]) -> None:
        self.option, self.cat, self.var, self.scale = option, cat, var, scale
        st = option.stack
        if len(st.workload.engines) > 1:
            raise SpecError(f"{st.name}: llmcap:workload.engine lists {', '.join(st.workload.engines)}; a sweep "
                            "prices one engine: set it to one (llmcap plan compares the engines of a list)")
        self.model: ModelArch = cat.model(st.workload.model)
        self.hw = st.hardware
        self.mixed = option.strategy == "mixed"
        self.purchase = "spot" if self.hw.purchase == "spot" else "on-demand"
        self._memo = memo
        self._fixed: list[tuple[Evaluated, float]] | None = None  # (searched candidate, its goodput scale)
        self._known: dict[tuple[Any, ...], dict[float, Goodput | str]] = {}
        self._cands: list[Candidate] = []
        if var in ("users", "rate"):  # goodput is independent of the amount of demand: search once
            w0 = with_value(st.workload, var, x0)
            s = search(PlanningProblem.of(cat, self.model, w0, self.hw, st.region), option.strategy, scale)
            # each with its batching flags tuned as the plan's finalists are (the analytic grid; the plan
            # then simulates its choice): on default flags the sweep disagreed with `llmcap plan` at its
            # own points (no crossover where the plans cross at 409 users)
            mode, grid_memo = demand_of(w0).mode, dict[Any, Goodput]()
            self._fixed = [(grid_tuned(cat, self.model, e, w0, mode, grid_memo), self._scale_of(e.cand))
                           for e in s.feasible]
        else:
            enum = "auto" if self.mixed else option.strategy
            problem = PlanningProblem.of(cat, self.model, st.workload, self.hw, st.region)
            self._cands = list(enumerate_candidates(problem, enum, []))

    def _scale_of(self, c: Candidate) -> float:
        """The calibration's goodput scale for this candidate's GPU (1.0 without one)."""
        engine = self.option.stack.workload.single_engine
        s = self.scale(c.instance.gpu, engine, self.model.hf_id) if self.scale else None
        return s[0] if s else 1.0

    def _goodput(self, *args: Any, **kwargs: Any) -> Goodput:
        """sizing.perf.goodput.goodput, memoised across options and points (same config, shape and SLO)."""
        cat, cfg, shape, ttft_p95_ms, itl_p95_ms = args
        key = (cfg, shape, ttft_p95_ms, itl_p95_ms, kwargs.get("mode", "closed"), kwargs.get("targets"))
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = goodput(cat, cfg, shape, ttft_p95_ms, itl_p95_ms, **kwargs)
        return hit

    def _bound(self, key: tuple[Any, ...], x: float) -> Goodput | str | None:
        """The exact outcome at the nearest looser value evaluated so far (None: none yet)."""
        known = self._known.get(key)
        if not known:
            return None
        d = _LOOSER[self.var]
        looser = [k for k in known if (k - x) * d >= 0]
        return known[min(looser, key=lambda k: abs(k - x))] if looser else None

    def _lower_bound_usd_per_hour(self, c: Candidate, bound: Goodput | str | None, demand: Demand) -> float:
        """A cost this candidate cannot beat at this point, from its goodput at a looser value (0: none known)."""
        if not isinstance(bound, Goodput):
            return 0.0
        price = self.cat.price(c.instance.instance_type, self.option.stack.region, self.purchase)
        if not price:
            return 0.0
        scale = self._scale_of(c)
        replicas_for_demand, replicas = size_replicas(
            demand.output_tokens_per_s, bound.output_tokens_per_s * scale, self.hw.redundancy,
            demand.concurrent_users if demand.mode == "closed" else None, bound.concurrency * scale)
        if self.mixed:
            return price.usd_per_hour * replicas_for_demand * _instances_per_replica(c)
        return price.usd_per_hour * instances_for(c, replicas)

    def feasible_at(self, x: float) -> tuple[list[Evaluated], Demand]:
        w = with_value(self.option.stack.workload, self.var, x)
        demand = demand_of(w)
        if self._fixed is not None:
            return [resize(e, demand, self.hw.redundancy, s) for e, s in self._fixed], demand
        queue: list[tuple[float, int, Candidate]] = []
        for n, c in enumerate(self._cands):
            b = self._bound(_perf_key(c), x)
            if b == _INFEASIBLE:
                continue
            queue.append((self._lower_bound_usd_per_hour(c, b, demand), n, c))
        queue.sort(key=lambda t: (t[0], t[1]))
        keep = TOP_K if self.mixed else 1
        out: list[Evaluated] = []
        ranks: list[float] = []
        for lower_bound, _n, c in queue:
            if len(ranks) >= keep and lower_bound > sorted(ranks)[keep - 1] * (1 + 1e-9) + 1e-9:
                break
            rej: list[Rejection] = []
            problem = PlanningProblem(self.cat, self.model, w, self.hw, self.option.stack.region, demand)
            e = evaluate(problem, self.purchase, c, rej, self._scale_of(c), goodput_fn=self._goodput)
            if e is not None:
                out.append(e)
                ranks.append(_rank(e, self.mixed))
                self._known.setdefault(_perf_key(c), {})[x] = e.gp
            elif rej:  # rejected for a reason that also holds at every tighter value
                self._known.setdefault(_perf_key(c), {})[x] = _INFEASIBLE
        return out, demand

    def point(self, x: float) -> SweepPoint:
        feas, demand = self.feasible_at(x)
        if not feas:
            return priced_point(x, None)
        if self.mixed:
            mix = best_mix(feas, self.hw.redundancy)
            assert mix is not None  # feas is non-empty
            usd_per_hour = mix.usd_per_hour
            gpus = sum(p.instances * p.ev.cand.instance.whole_gpus for p in mix.parts)
            deployment = " + ".join(f"{p.instances}× {p.ev.cand.label()}" for p in mix.parts)
        else:
            best = min(feas, key=lambda e: (round(e.usd_per_hour, 6), e.gpus, -e.gp.output_tokens_per_s))
            usd_per_hour, gpus, deployment = best.usd_per_hour, best.gpus, f"{best.instances}× {best.cand.label()}"
        return priced_point(x, usd_per_hour, usd_per_million_tokens(usd_per_hour, demand.output_tokens_per_s),
                                 gpus, deployment)

    def points(self, xs: tuple[float, ...]) -> list[SweepPoint]:
        """Every swept value, evaluated loosest first so each point has bounds from a looser one."""
        order = sorted(xs, key=lambda v: -v * _LOOSER.get(self.var, 1))
        got = {x: self.point(x) for x in order}
        return [got[x] for x in xs]


# ---------------------------------------------------------------- crossovers and edges

PriceAt = Callable[[str, float], float | None]  # (option label, x) → unrounded $/hour, None: infeasible


def _refine(lo: float, hi: float, var: str, holds_at: Callable[[float], bool]) -> tuple[float, float]:
    """Narrow (lo, hi) where holds_at(lo) is False and holds_at(hi) is True to adjacent integers for
    integer variables, else to a tenth of the interval (the sweep grid is already fine there)."""
    if var in INTEGER_VARS:
        i, j = int(lo), int(hi)
        while j - i > 1:
            m = (i + j) // 2
            i, j = (i, m) if holds_at(m) else (m, j)
        return float(i), float(j)
    tol = (hi - lo) / 10.0
    a, b = lo, hi
    while b - a > tol:
        mid = (a + b) / 2
        a, b = (a, mid) if holds_at(mid) else (mid, b)
    return round(a, 4), round(b, 4)


def _sign(a: float, b: float) -> int:
    return 0 if abs(a - b) <= 1e-6 * max(a, b, 1.0) else (1 if a > b else -1)


def find_crossovers(var: str, series: dict[str, list[SweepPoint]], price_at: PriceAt | None = None) -> list[Crossover]:
    """Where the cheaper of two options changes, for every pair, along the sweep (both feasible).

    With `price_at` the switch is narrowed between the two swept points."""
    out: list[Crossover] = []
    names = list(series)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            last: tuple[int, SweepPoint] | None = None  # (sign, point of a)
            for pa, pb in zip(series[a], series[b], strict=True):
                usd_a, usd_b = pa.exact_usd_per_hour, pb.exact_usd_per_hour  # unrounded $/hour
                if usd_a is None or usd_b is None:
                    continue
                s = _sign(usd_a, usd_b)
                if s == 0:
                    continue
                if last is not None and s != last[0]:
                    x0, x1 = last[1].x, pa.x
                    new_cheaper = b if s > 0 else a
                    if price_at is not None:
                        pf: PriceAt = price_at

                        def holds(x: float, _s: int = s, _a: str = a, _b: str = b, _p: PriceAt = pf) -> bool:
                            usd_a, usd_b = _p(_a, x), _p(_b, x)
                            return usd_a is not None and usd_b is not None and _sign(usd_a, usd_b) == _s
                        x0, x1 = _refine(x0, x1, var, holds)
                    usd_a_at_x = price_at(a, x1) if price_at else usd_a  # $/hour at the crossover
                    usd_b_at_x = price_at(b, x1) if price_at else usd_b
                    old_cheaper = a if new_cheaper == b else b
                    out.append(Crossover(
                        between=[a, b], x=x1, last_x_before=x0, variable=var,
                        cheaper_before=old_cheaper, cheaper_after=new_cheaper,
                        usd_per_month_at_x={a: round(usd_per_month(usd_a_at_x or 0.0), 2),
                                            b: round(usd_per_month(usd_b_at_x or 0.0), 2)},
                        text=f"{new_cheaper} becomes cheaper than {old_cheaper} at {SWEEP_VARS[var]} = {x1:g}"))
                last = (s, pa)
    return sorted(out, key=lambda c: c.x)


def find_feasibility_edges(var: str, series: dict[str, list[SweepPoint]],
                           price_at: PriceAt | None = None) -> list[FeasibilityEdge]:
    """Where an option starts or stops having a plan that meets the SLO along the sweep."""
    out: list[FeasibilityEdge] = []
    for name, pts in series.items():
        for p0, p1 in zip(pts, pts[1:], strict=False):
            f0, f1 = p0.feasible, p1.feasible
            if f0 == f1:
                continue
            x0, x1 = p0.x, p1.x
            if price_at is not None:
                pf: PriceAt = price_at

                def holds(x: float, _f1: bool = f1, _n: str = name, _p: PriceAt = pf) -> bool:
                    return (_p(_n, x) is not None) == _f1
                x0, x1 = _refine(x0, x1, var, holds)
            feasible_x, infeasible_x = (x1, x0) if f1 else (x0, x1)
            out.append(FeasibilityEdge(
                option=name, variable=var, feasible="above" if f1 else "below", x=feasible_x, other_x=infeasible_x,
                text=f"{name}: a plan meets the SLO only {'at or above' if f1 else 'at or below'} "
                     f"{SWEEP_VARS[var]} = {feasible_x:g} (none at {infeasible_x:g})"))
    return out


def cheapest_api(cat: Catalog, stack: Stack) -> CheapestApi | None:
    """The hosted API (for the stack's model, or the nearest comparable one) with the smallest bill for this
    workload's traffic: input and output tokens at the stack's mean prompt / output lengths, per 1M output
    tokens (the unit of the self-hosted curve)."""
    m = cat.model(stack.workload.model)
    ratio = stack.workload.prompt_tokens.mean / stack.workload.output_tokens.mean
    share = stack.workload.prefix_cache_hit_rate  # the share the self-hosted curve is sized with
    rows, note = api_comparison(cat, m.hf_id, m.params_active_b, m.params_total_b, ratio, 1.0, 1.0, share)
    if not rows:
        return None
    r = min(rows, key=lambda a: a.usd_per_month_same_traffic)
    per_in = input_usd_per_mtok(r.usd_per_million_input_tokens, r.usd_per_million_cached_input_tokens, share)
    return CheapestApi(provider=r.provider, model=r.model, exact_model=r.exact_model,
                       usd_per_million_output_tokens=r.usd_per_million_output_tokens,
                       usd_per_million_input_tokens=r.usd_per_million_input_tokens, note=note or "",
                       usd_per_million_output_tokens_with_input=round(r.usd_per_million_output_tokens + ratio * per_in,
                                                                      4),
                       prompt_tokens_per_output_token=round(ratio, 4),
                       usd_per_million_cached_input_tokens=r.usd_per_million_cached_input_tokens,
                       cached_input_share=r.cached_input_share)


def run_sweep(options: list[Option], spec: SweepSpec, cat: Catalog,
              goodput_scale: GoodputScale | None | bool = True, refine: bool = True) -> Sweep:
    """Price every option at every swept value; find the crossovers and feasibility edges."""
    scale = default_goodput_scale() if goodput_scale is True else (goodput_scale or None)
    memo: dict[tuple[Any, ...], Goodput] = {}
    prepared = {o.label: _Prepared(o, cat, spec.var, spec.values[0], scale, memo) for o in options}
    series = {name: p.points(spec.values) for name, p in prepared.items()}
    seen: dict[tuple[str, float], float | None] = {}

    def price_at(name: str, x: float) -> float | None:
        if (name, x) not in seen:
            seen[(name, x)] = prepared[name].point(x).exact_usd_per_hour
        return seen[(name, x)]

    warnings = [f"{o.label}: purchase 'mixed' is swept at on-demand prices (the plan splits spot pools)"
                for o in options if o.stack.hardware.purchase == "mixed"]
    at = price_at if refine else None
    return Sweep(variable=spec.var, label=SWEEP_VARS[spec.var], log_spaced=spec.log, values=list(spec.values),
                 series=series, crossovers=find_crossovers(spec.var, series, at),
                 feasibility_edges=find_feasibility_edges(spec.var, series, at),
                 cheapest_api=cheapest_api(cat, options[0].stack), warnings=warnings)
