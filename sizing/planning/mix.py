"""Mixed strategy: a cost-optimal mix of two GPU pools (in the spirit of Mélange, Griggs et al.
2024, which allocates demand across GPU types by solving a cost-minimising bin-packing ILP).

We have one request shape per workload, so the ILP reduces to: choose instance counts
n_a, n_b of two feasible candidates so that the replicas they hold cover the demand,
Σ replicas_i ÷ replicas_needed_alone_i ≥ 1 + redundancy × the largest single-replica share,
at least cost. Whole instances make a mix cheaper than any single type when the demand falls
between two instance sizes (a big node's last instance would sit mostly idle). The search runs
over the K most cost-efficient candidates, pairwise; per pair it scans the less efficient pool's
instance count with a lower bound that ends the scan exactly, capped at MAX_MINORITY_STEPS steps
so a huge demand still answers in well under a second (Mix.exact says whether the cap was hit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sizing.planning.candidates import Evaluated

TOP_K = 8
# Steps of the minority pool scanned per pair before the search gives up on exactness (and says so):
# 36 pairs x 2,000 steps stay well under a second, whatever the demand.
MAX_MINORITY_STEPS = 2000


@dataclass(frozen=True)
class MixPart:
    ev: Evaluated
    instances: int
    replicas: int
    demand_share: float


@dataclass(frozen=True)
class Mix:
    parts: tuple[MixPart, ...]
    usd_per_hour: float
    exact: bool = True  # False: some pair's split search hit MAX_MINORITY_STEPS (see best_mix)


def _share(ev: Evaluated) -> float:
    """Share of the whole demand one replica of this candidate carries."""
    return 1.0 / ev.replicas_for_demand


def best_mix(feasible: list[Evaluated], redundancy: int) -> Mix | None:
    """The cheapest mix of one or two candidate pools; None when there is nothing feasible."""
    if not feasible:
        return None
    ranked = sorted(feasible, key=_cost_per_share)[:TOP_K]
    best: Mix | None = None
    exact = True
    for i, a in enumerate(ranked):
        for b in ranked[i:]:
            m, pair_exact = _best_pair(a, b, redundancy)
            exact = exact and pair_exact
            if m and (best is None or m.usd_per_hour < best.usd_per_hour - 1e-9):
                best = m
    return Mix(best.parts, best.usd_per_hour, exact) if best is not None else None


def _replicas(ev: Evaluated, instances: int) -> int:
    return instances // ev.cand.pp if ev.cand.pp > 1 else instances * ev.cand.replicas_per_instance


def _instances_for(ev: Evaluated, replicas: int) -> int:
    return replicas * ev.cand.pp if ev.cand.pp > 1 else math.ceil(replicas / ev.cand.replicas_per_instance)


def _cost_per_share(ev: Evaluated) -> float:
    """$/hour per unit of demand share at full packing (the rank best_mix sorts by)."""
    if ev.cand.pp > 1:
        return ev.usd_per_instance_hour * ev.cand.pp / _share(ev)
    return ev.usd_per_instance_hour / (ev.cand.replicas_per_instance * _share(ev))


def _best_pair(a: Evaluated, b: Evaluated, redundancy: int) -> tuple[Mix | None, bool]:
    """The cheapest split of the demand between `a` (the more cost-efficient, as ranked) and `b`.

    Scans the instances of `b` (the minority pool) upwards; `a` covers the rest with the fewest
    whole instances. A continuous lower bound, n_b × $b + (share still needed) × $a per share,
    never falls as n_b grows (b is no more efficient than a), so the scan stops exactly once it
    reaches the best cost found. At most MAX_MINORITY_STEPS steps: the second value is False when
    that cap, not the bound, ended the scan (then a split with more of `b` was not examined)."""
    need = 1.0 + redundancy * max(_share(a), _share(b))
    s_a, s_b = _share(a), _share(b)
    e_a = _cost_per_share(a)
    c_a, c_b = a.usd_per_instance_hour, b.usd_per_instance_hour
    best: tuple[float, int, int] | None = None  # cost, instances of a, instances of b
    step = b.cand.pp if b.cand.pp > 1 else 1
    max_b = 0 if a is b else _instances_for(b, math.ceil(need / s_b))
    exact = True
    for k, n_b in enumerate(range(0, max_b + 1, step)):
        r_b = _replicas(b, n_b)
        rest = max(need - r_b * s_b, 0.0)
        if best is not None and n_b * c_b + rest * e_a >= best[0] - 1e-9:
            break  # no split with more of b can be cheaper
        if k >= MAX_MINORITY_STEPS:
            exact = False
            break
        r_a = math.ceil(rest / s_a - 1e-9) if rest > 0 else 0
        n_a = _instances_for(a, r_a) if r_a else 0
        cost = n_a * c_a + n_b * c_b
        if (n_a or n_b) and (best is None or cost < best[0] - 1e-9):
            best = (cost, n_a, n_b)
    if best is None:
        return None, exact
    cost, n_a, n_b = best
    chosen = [(ev, _replicas(ev, n), n) for ev, n in ((a, n_a), (b, n_b)) if n > 0]
    total_share = sum(r * _share(ev) for ev, r, _ in chosen)
    return Mix(tuple(MixPart(ev, n, r, r * _share(ev) / total_share) for ev, r, n in chosen), cost), exact
