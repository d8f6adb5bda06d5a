"""Compare deployment options (stacks, or strategies of one stack): a Plan per option, a summary
row each (GPUs, $/month, $/1M tokens, SLO headroom, blast radius, cold start), a verdict with its
reason; and sweeps of one workload variable with the crossovers where the cheapest option changes.

Owns: option evaluation, verdict, sweeps, crossovers. Must not import matplotlib (sizing.report.plot
does, only when a plot is asked for), pulumi or boto3.

Sweeps do not re-plan each point. For `users` and `rate` the goodput of a candidate does not depend
on the demand, so each option's candidates are searched once and re-sized per point
(sizing.planning.candidates.resize). For `itl_ms` and `prompt_tokens` goodput changes, so candidates are
evaluated per point through a memoised goodput: instance types with the same GPUs, precision and
parallelism share one evaluation per (config, request shape, SLO).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sizing.cost.money import api_comparison, usd_per_million_tokens, usd_per_month
from sizing.errors import NoFeasiblePlanError, SpecError
from sizing.perf.goodput import goodput
from sizing.perf.load import Goodput
from sizing.planning.candidates import (
    Candidate,
    Evaluated,
    enumerate_candidates,
    evaluate,
    instances_for,
    resize,
    size_replicas,
)
from sizing.planning.demand import Demand, demand_of
from sizing.planning.mix import TOP_K, best_mix
from sizing.planning.planner import default_goodput_scale, plan_stack
from sizing.planning.search import GoodputScale, search
from sizing.spec import WorkloadSpec

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import ModelArch
    from sizing.plan import Plan, Rejection
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
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Option:
    """One thing compared: a stack planned with a strategy."""

    label: str
    stack: Stack
    strategy: str


# ---------------------------------------------------------------- one plan per option


def blast_radius(plan: Plan) -> float:
    """Share of goodput capacity lost when one node fails (the worst node of any pool).

    A node holds replicas_per_instance replicas; a multi-node (pipeline) replica dies with any of its nodes."""
    total = sum(p.replicas * p.per_replica.goodput_output_tokens_per_s for p in plan.pools)
    if total <= 0:
        return 1.0
    worst = max((1 if p.nodes_per_replica > 1 else min(p.replicas_per_instance, p.replicas))
                * p.per_replica.goodput_output_tokens_per_s for p in plan.pools)
    return min(worst / total, 1.0)


def cold_start_s(plan: Plan) -> float:
    """A new replica on a new node until it serves (the slowest pool), seconds: node boot, image pull,
    weights and engine start (sizing/perf/cold_start.py)."""
    from sizing.perf.cold_start import cold_start

    return round(max(cold_start(p).total_s for p in plan.pools), 1)


def _headroom(measured: float, target: float) -> float:
    return round(1.0 - measured / target, 4) if target > 0 else 0.0


def summarize(option: Option, plan: Plan) -> dict[str, Any]:
    """One option's row: the Plan's figures every view shows, plus blast radius and cold start."""
    t, w = plan.totals, option.stack.workload
    lead = plan.pools[0]
    capacity_after_loss = t.capacity_output_tokens_per_s * (1 - blast_radius(plan))
    return {
        "label": option.label, "stack": option.stack.name, "strategy": plan.strategy, "feasible": True,
        "model": plan.model,
        "pools": [f"{p.instances_desired}× {p.instance_type} ({p.replicas} replicas of {p.gpu} "
                  f"×{p.tensor_parallel * p.pipeline_parallel}, {p.precision})" for p in plan.pools],
        "gpu": lead.gpu, "instance_type": lead.instance_type, "precision": lead.precision,
        "gpus": t.gpus, "instances": t.instances, "usd_per_hour": t.usd_per_hour, "usd_per_month": t.usd_per_month,
        "all_in_usd_per_month": t.all_in_usd_per_month,
        "usd_per_million_output_tokens": t.usd_per_million_output_tokens,
        "usd_per_million_output_tokens_at_capacity": t.usd_per_million_output_tokens_at_capacity,
        "ttft_p95_ms": max(p.per_replica.ttft_p95_ms for p in plan.pools),
        "itl_p95_ms": max(p.per_replica.itl_p95_ms for p in plan.pools),
        "ttft_headroom": min(_headroom(p.per_replica.ttft_p95_ms, w.slo.ttft_p95_ms) for p in plan.pools),
        "itl_headroom": min(_headroom(p.per_replica.itl_p95_ms, w.slo.itl_p95_ms) for p in plan.pools),
        "blast_radius": round(blast_radius(plan), 4),
        "survives_node_loss": capacity_after_loss >= t.demand_output_tokens_per_s - 1e-6,
        "cold_start_s": cold_start_s(plan),
        "utilization": t.utilization,
        "cheapest_api_usd_per_million_output_tokens": min(
            (a.usd_per_million_output_tokens for a in plan.api_comparison), default=None),
        "warnings": plan.warnings,
    }


def infeasible_summary(option: Option, err: NoFeasiblePlanError) -> dict[str, Any]:
    return {"label": option.label, "stack": option.stack.name, "strategy": option.strategy, "feasible": False,
            "problems": err.problems, "suggestions": err.suggestions}


@dataclass
class Comparison:
    options: list[dict[str, Any]]
    winner: str | None
    reason: str
    plans: dict[str, Plan] = field(default_factory=dict)


def compare_options(options: list[Option], cat: Catalog,
                    goodput_scale: GoodputScale | None | bool = True) -> Comparison:
    """Plan every option (infeasible ones keep their reasons) and pick the winner. Options are planned
    with vLLM's default batching flags (no tuning or simulation of finalists, sizing.planning.batching), the
    same model the --sweep points use, so that a comparison and its sweep agree."""
    rows: list[dict[str, Any]] = []
    plans: dict[str, Plan] = {}
    for o in options:
        try:
            plan = plan_stack(o.stack, cat, o.strategy, goodput_scale, tune_batching=False)
        except NoFeasiblePlanError as e:
            rows.append(infeasible_summary(o, e))
            continue
        plans[o.label] = plan
        rows.append(summarize(o, plan))
    mark_identical(rows)
    winner, reason = verdict(rows)
    return Comparison(rows, winner, reason, plans)


def _deployment_key(r: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two options the same deployment; a row without pools is never the same as another."""
    return (r.get("model"), tuple(r.get("pools") or [id(r)]), round(r["usd_per_month"], 2))


def mark_identical(rows: list[dict[str, Any]]) -> None:
    """`same_as`: the label of an earlier option with the same model, pools and cost (e.g. `mixed` that
    found no cheaper mix than one pool), so the views say "identical" instead of comparing a plan to itself."""
    seen: dict[tuple[Any, ...], str] = {}
    for r in rows:
        if not r["feasible"]:
            continue
        key = _deployment_key(r)
        if key in seen:
            r["same_as"] = seen[key]
        else:
            seen[key] = r["label"]


def _pct_differs(a: float, b: float) -> bool:
    """Whether two shares differ as printed (whole percent): no "(4% vs 4%)" verdicts."""
    return f"{a:.0%}" != f"{b:.0%}"


def verdict(rows: list[dict[str, Any]]) -> tuple[str | None, str]:
    """The cheapest feasible option by $/month (ties: smaller blast radius); the reason in one sentence."""
    ok = sorted((r for r in rows if r["feasible"]),
                key=lambda r: (round(r["usd_per_month"], 2), r["blast_radius"], r["gpus"]))
    bad = [r["label"] for r in rows if not r["feasible"]]
    if not ok:
        return None, "no option has a plan that meets the SLO: " + "; ".join(
            f"{r['label']}: {r['problems'][-1]}" for r in rows)
    win = ok[0]
    parts: list[str] = []
    models = sorted({str(r["model"]) for r in ok if r.get("model")})
    if len(models) > 1:
        parts.append("the options serve different models (" + ", ".join(
            f"{r['label']}: {r['model']}" for r in ok) + "), so the cheaper one is a substitute only if its "
            "model is good enough")
    same = [r["label"] for r in ok[1:] if _deployment_key(r) == _deployment_key(win)]
    if same:
        parts.append(f"{win['label']} and {', '.join(same)} are the identical deployment "
                     f"({'; '.join(win.get('pools', []))})")
    rest = [r for r in ok[1:] if r["label"] not in same]
    if rest:
        nxt = rest[0]
        d = nxt["usd_per_month"] - win["usd_per_month"]
        if d > 0.005:
            pct = d / nxt["usd_per_month"]
            parts.append(f"{win['label']} costs ${d:,.0f}/month less than {nxt['label']} "
                         f"({f'{pct:.0%}' if pct >= 0.005 else 'under 1%'} cheaper: "
                         f"${win['usd_per_month']:,.0f} vs ${nxt['usd_per_month']:,.0f})")
        elif _pct_differs(win["blast_radius"], nxt["blast_radius"]):
            parts.append(f"{win['label']} costs the same as {nxt['label']} and loses less capacity when a node "
                         f"fails ({win['blast_radius']:.0%} vs {nxt['blast_radius']:.0%})")
        else:
            fewer = "fewer" if win["gpus"] < nxt["gpus"] else "as many"
            parts.append(f"{win['label']} costs the same as {nxt['label']} and loses as much capacity when a node "
                         f"fails ({win['blast_radius']:.0%}); it has {fewer} GPUs")
        if win["blast_radius"] > nxt["blast_radius"] and _pct_differs(win["blast_radius"], nxt["blast_radius"]):
            parts.append(f"but one node failure takes {win['blast_radius']:.0%} of its capacity "
                         f"(vs {nxt['blast_radius']:.0%})")
    elif not same:
        parts.append(f"{win['label']} is the only option that meets the SLO")
    if not win["survives_node_loss"]:
        parts.append("and it cannot carry the full demand after losing one node")
    if bad:
        parts.append(f"no plan meets the SLO for {', '.join(bad)}")
    return win["label"], "; ".join(parts)


# ---------------------------------------------------------------- sweeps


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
        n = int(math.floor((hi - lo) / step + 1e-9)) + 1
        if n > MAX_POINTS:
            raise SpecError(f"--sweep {text!r}: {n} points; at most {MAX_POINTS}")
        vals = [lo + i * step for i in range(n)]
        log = False
    else:
        n = int(m.group(5)) if m.group(4) else DEFAULT_POINTS
        if not 2 <= n <= MAX_POINTS:
            raise SpecError(f"--sweep {text!r}: POINTS must be 2..{MAX_POINTS}")
        vals = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
        log = True
    if var in INTEGER_VARS:
        vals = [float(round(v)) for v in vals]
    out = tuple(sorted({round(v, 6) for v in vals}))
    return SweepSpec(var, out, log)


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
        d["slo"] = {**d["slo"], "itl_p95_ms": x}
    else:
        raise SpecError(f"--sweep: unknown variable {var!r}")
    return WorkloadSpec.model_validate(d)


@dataclass(frozen=True)
class SweepPoint:
    x: float
    usd_per_hour: float | None  # None: no candidate meets the SLO
    usd_per_month: float | None
    usd_per_million_output_tokens: float | None
    gpus: int
    deployment: str  # e.g. "3× g6.12xlarge fp8 TP4"

    def as_dict(self) -> dict[str, Any]:
        r = None if self.usd_per_hour is None else round(self.usd_per_hour, 4)
        return {"x": self.x, "usd_per_hour": r,
                "usd_per_month": None if self.usd_per_month is None else round(self.usd_per_month, 2),
                "usd_per_million_output_tokens": None if self.usd_per_million_output_tokens is None
                else round(self.usd_per_million_output_tokens, 4),
                "gpus": self.gpus, "deployment": self.deployment}


_INFEASIBLE = "infeasible"
# which direction of each per-point variable loosens the SLO problem (more goodput per replica)
_LOOSER = {"itl_ms": 1, "prompt_tokens": -1}


def _perf_key(c: Candidate) -> tuple[Any, ...]:
    """Candidates with the same key have the same goodput and fit (they differ in price and packing)."""
    i = c.instance
    return (i.gpu, c.precision, c.tp, c.pp, i.gpu_interconnect, i.gpu_memory_gib_each)


def _rank(e: Evaluated, mixed: bool) -> float:
    """What the search minimises: $/hour; for mixed, the cost-efficiency sizing.planning.mix ranks by."""
    if not mixed:
        return e.usd_per_hour
    return e.usd_per_instance_hour * e.replicas_for_demand * (
        e.cand.pp if e.cand.pp > 1 else 1.0 / e.cand.replicas_per_instance)


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
        self.model: ModelArch = cat.model(st.workload.model)
        self.hw = st.hardware
        self.mixed = option.strategy == "mixed"
        self.purchase = "spot" if self.hw.purchase == "spot" else "on-demand"
        self._memo = memo
        self._fixed: list[tuple[Evaluated, float]] | None = None
        self._known: dict[tuple[Any, ...], dict[float, Goodput | str]] = {}
        self._cands: list[Candidate] = []
        if var in ("users", "rate"):  # goodput is independent of the amount of demand: search once
            w0 = with_value(st.workload, var, x0)
            s = search(cat, self.model, w0, self.hw, st.region, option.strategy, demand_of(w0), scale)
            self._fixed = [(e, self._scale_of(e.cand)) for e in s.feasible]
        else:
            enum = "auto" if self.mixed else option.strategy
            self._cands = list(enumerate_candidates(cat, self.model, st.workload, self.hw, st.region, enum, []))

    def _scale_of(self, c: Candidate) -> float:
        s = self.scale(c.instance.gpu, self.option.stack.workload.engine, self.model.hf_id) if self.scale else None
        return s[0] if s else 1.0

    def _goodput(self, *args: Any, **kwargs: Any) -> Goodput:
        cat, cfg, shape, ttft, itl = args
        key = (cfg, shape, ttft, itl, kwargs.get("mode", "closed"), kwargs.get("targets"))
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = goodput(cat, cfg, shape, ttft, itl, **kwargs)
        return hit

    def _bound(self, key: tuple[Any, ...], x: float) -> Goodput | str | None:
        """The exact outcome at the nearest looser value evaluated so far (None: none yet)."""
        known = self._known.get(key)
        if not known:
            return None
        d = _LOOSER[self.var]
        looser = [k for k in known if (k - x) * d >= 0]
        return known[min(looser, key=lambda k: abs(k - x))] if looser else None

    def feasible_at(self, x: float) -> tuple[list[Evaluated], Demand]:
        w = with_value(self.option.stack.workload, self.var, x)
        d = demand_of(w)
        if self._fixed is not None:
            return [resize(e, d, self.hw.redundancy, s) for e, s in self._fixed], d
        queue: list[tuple[float, int, Candidate]] = []
        for n, c in enumerate(self._cands):
            b = self._bound(_perf_key(c), x)
            if b == _INFEASIBLE:
                continue
            lb = 0.0
            if isinstance(b, Goodput) and (price := self.cat.price(c.instance.instance_type,
                                                                    self.option.stack.region, self.purchase)):
                sc = self._scale_of(c)
                need, replicas = size_replicas(d.output_tokens_per_s, b.output_tokens_per_s * sc,
                                               self.hw.redundancy, d.concurrent_users if d.mode == "closed"
                                               else None, b.concurrency * sc)
                lb = price.usd_per_hour * (instances_for(c, replicas) if not self.mixed else need * (
                    c.pp if c.pp > 1 else 1.0 / c.replicas_per_instance))
            queue.append((lb, n, c))
        queue.sort(key=lambda t: (t[0], t[1]))
        keep = TOP_K if self.mixed else 1
        out: list[Evaluated] = []
        ranks: list[float] = []
        for lb, _n, c in queue:
            if len(ranks) >= keep and lb > sorted(ranks)[keep - 1] * (1 + 1e-9) + 1e-9:
                break
            rej: list[Rejection] = []
            e = evaluate(self.cat, self.model, w, self.hw, self.option.stack.region, self.purchase, d, c, rej,
                         self._scale_of(c), goodput_fn=self._goodput)
            if e is not None:
                out.append(e)
                ranks.append(_rank(e, self.mixed))
                self._known.setdefault(_perf_key(c), {})[x] = e.gp
            elif rej:  # rejected for a reason that also holds at every tighter value
                self._known.setdefault(_perf_key(c), {})[x] = _INFEASIBLE
        return out, d

    def point(self, x: float) -> SweepPoint:
        feas, d = self.feasible_at(x)
        if not feas:
            return SweepPoint(x, None, None, None, 0, "no plan meets the SLO")
        if self.mixed:
            mix = best_mix(feas, self.hw.redundancy)
            assert mix is not None  # feas is non-empty
            usd_h, gpus = mix.usd_per_hour, sum(p.instances * p.ev.cand.instance.whole_gpus for p in mix.parts)
            dep = " + ".join(f"{p.instances}× {p.ev.cand.label()}" for p in mix.parts)
        else:
            best = min(feas, key=lambda e: (round(e.usd_per_hour, 6), e.gpus, -e.gp.output_tokens_per_s))
            usd_h, gpus, dep = best.usd_per_hour, best.gpus, f"{best.instances}× {best.cand.label()}"
        return SweepPoint(x, usd_h, usd_per_month(usd_h), usd_per_million_tokens(usd_h, d.output_tokens_per_s),
                          gpus, dep)

    def points(self, xs: tuple[float, ...]) -> list[SweepPoint]:
        """Every swept value, evaluated loosest first so each point has bounds from a looser one."""
        order = sorted(xs, key=lambda v: -v * _LOOSER.get(self.var, 1))
        got = {x: self.point(x) for x in order}
        return [got[x] for x in xs]


@dataclass
class Sweep:
    var: str
    log: bool
    values: list[float]
    series: dict[str, list[SweepPoint]]
    crossovers: list[dict[str, Any]]
    feasibility_edges: list[dict[str, Any]]
    cheapest_api: dict[str, Any] | None
    warnings: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"variable": self.var, "label": SWEEP_VARS[self.var], "log_spaced": self.log,
                "values": self.values,
                "series": {k: [p.as_dict() for p in v] for k, v in self.series.items()},
                "crossovers": self.crossovers, "feasibility_edges": self.feasibility_edges,
                "cheapest_api": self.cheapest_api, "warnings": self.warnings}


def _cost(p: SweepPoint) -> float | None:
    return p.usd_per_hour


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


def find_crossovers(var: str, series: dict[str, list[SweepPoint]],
                    price_at: Callable[[str, float], float | None] | None = None) -> list[dict[str, Any]]:
    """Where the cheaper of two options changes, for every pair, along the sweep (both feasible).

    With `price_at` (option, x → $/hour) the switch is narrowed between the two swept points."""
    out: list[dict[str, Any]] = []
    names = list(series)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            last: tuple[int, SweepPoint, SweepPoint] | None = None  # (sign, point of a, point of b)
            for pa, pb in zip(series[a], series[b], strict=True):
                ca, cb = _cost(pa), _cost(pb)
                if ca is None or cb is None:
                    continue
                s = _sign(ca, cb)
                if s == 0:
                    continue
                if last is not None and s != last[0]:
                    x0, x1 = last[1].x, pa.x
                    new_cheaper = b if s > 0 else a
                    if price_at is not None:
                        pf: Callable[[str, float], float | None] = price_at

                        def holds(x: float, _s: int = s, _a: str = a, _b: str = b,
                                  _p: Callable[[str, float], float | None] = pf) -> bool:
                            ya, yb = _p(_a, x), _p(_b, x)
                            return ya is not None and yb is not None and _sign(ya, yb) == _s
                        x0, x1 = _refine(x0, x1, var, holds)
                    ya = price_at(a, x1) if price_at else ca
                    yb = price_at(b, x1) if price_at else cb
                    out.append({
                        "between": [a, b], "x": x1, "last_x_before": x0, "variable": var,
                        "cheaper_before": a if new_cheaper == b else b, "cheaper_after": new_cheaper,
                        "usd_per_month_at_x": {a: round(usd_per_month(ya or 0.0), 2),
                                               b: round(usd_per_month(yb or 0.0), 2)},
                        "text": f"{new_cheaper} becomes cheaper than {a if new_cheaper == b else b} at "
                                f"{SWEEP_VARS[var]} = {x1:g}",
                    })
                last = (s, pa, pb)
    return sorted(out, key=lambda c: c["x"])


def find_feasibility_edges(var: str, series: dict[str, list[SweepPoint]],
                           price_at: Callable[[str, float], float | None] | None = None) -> list[dict[str, Any]]:
    """Where an option starts or stops having a plan that meets the SLO along the sweep."""
    out: list[dict[str, Any]] = []
    for name, pts in series.items():
        for p0, p1 in zip(pts, pts[1:], strict=False):
            f0, f1 = p0.usd_per_hour is not None, p1.usd_per_hour is not None
            if f0 == f1:
                continue
            x0, x1 = p0.x, p1.x
            if price_at is not None:
                pf: Callable[[str, float], float | None] = price_at

                def holds(x: float, _f1: bool = f1, _n: str = name,
                          _p: Callable[[str, float], float | None] = pf) -> bool:
                    return (_p(_n, x) is not None) == _f1
                x0, x1 = _refine(x0, x1, var, holds)
            feasible_side = "above" if f1 else "below"
            lo_hi = x1 if f1 else x0
            out.append({"option": name, "variable": var, "feasible": feasible_side, "x": lo_hi,
                        "other_x": x0 if f1 else x1,
                        "text": f"{name}: a plan meets the SLO only {'at or above' if f1 else 'at or below'} "
                                f"{SWEEP_VARS[var]} = {lo_hi:g} (none at {x0 if f1 else x1:g})"})
    return out


def cheapest_api(cat: Catalog, stack: Stack) -> dict[str, Any] | None:
    """The cheapest hosted-API output price for the stack's model (or the nearest comparable one)."""
    m = cat.model(stack.workload.model)
    rows, note = api_comparison(cat, m.hf_id, m.params_active_b, m.params_total_b, 1.0, 1.0, 1.0)
    if not rows:
        return None
    r = min(rows, key=lambda a: a.usd_per_million_output_tokens)
    return {"provider": r.provider, "model": r.model, "exact_model": r.exact_model,
            "usd_per_million_output_tokens": r.usd_per_million_output_tokens,
            "usd_per_million_input_tokens": r.usd_per_million_input_tokens, "note": note or ""}


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
            seen[(name, x)] = prepared[name].point(x).usd_per_hour
        return seen[(name, x)]

    warnings = [f"{o.label}: purchase 'mixed' is swept at on-demand prices (the plan splits spot pools)"
                for o in options if o.stack.hardware.purchase == "mixed"]
    at = price_at if refine else None
    return Sweep(spec.var, spec.log, list(spec.values), series, find_crossovers(spec.var, series, at),
                 find_feasibility_edges(spec.var, series, at), cheapest_api(cat, options[0].stack), warnings)


def comparison_json(cmp: Comparison, sweep: Sweep | None) -> dict[str, Any]:
    """The `llmcap compare --format json` document."""
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "options": cmp.options, "winner": cmp.winner,
                           "reason": cmp.reason, "crossovers": sweep.crossovers if sweep else []}
    if sweep:
        doc["sweep"] = sweep.as_dict()
    return doc
