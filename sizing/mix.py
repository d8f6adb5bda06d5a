"""Mixed strategy: a cost-optimal mix of two GPU pools (in the spirit of Mélange, Griggs et al.
2024, which allocates demand across GPU types by solving a cost-minimising bin-packing ILP).

We have one request shape per workload, so the ILP reduces to: choose instance counts
n_a, n_b of two feasible candidates so that the replicas they hold cover the demand,
Σ replicas_i ÷ replicas_needed_alone_i ≥ 1 + redundancy × the largest single-replica share,
at least cost. Whole instances make a mix cheaper than any single type when the demand falls
between two instance sizes (a big node's last instance would sit mostly idle). The search is
exact over the K most cost-efficient candidates (pairwise, every n_a), which is small.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sizing.candidates import Evaluated, instances_for

TOP_K = 8


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


def _share(ev: Evaluated) -> float:
    """Share of the whole demand one replica of this candidate carries."""
    return 1.0 / ev.replicas_for_demand


def best_mix(feasible: list[Evaluated], redundancy: int) -> Mix | None:
    """The cheapest mix of one or two candidate pools; None when there is nothing feasible."""
    if not feasible:
        return None
    ranked = sorted(feasible, key=lambda e: e.usd_per_instance_hour / (e.cand.replicas_per_instance * _share(e))
                    if e.cand.pp == 1 else e.usd_per_instance_hour * e.cand.pp / _share(e))[:TOP_K]
    best: Mix | None = None
    for i, a in enumerate(ranked):
        for b in ranked[i:]:
            m = _best_pair(a, b, redundancy)
            if m and (best is None or m.usd_per_hour < best.usd_per_hour - 1e-9):
                best = m
    return best


def _replicas(ev: Evaluated, instances: int) -> int:
    return instances // ev.cand.pp if ev.cand.pp > 1 else instances * ev.cand.replicas_per_instance


def _instances_for(ev: Evaluated, replicas: int) -> int:
    return replicas * ev.cand.pp if ev.cand.pp > 1 else math.ceil(replicas / ev.cand.replicas_per_instance)


def pool_instances(parts: list[tuple[Evaluated, int]], redundancy: int) -> list[int]:
    """Instances of each (candidate, replicas) pool, packed as the Plan builds them."""
    return [instances_for(ev.cand, replicas) for ev, replicas in parts]


def _best_pair(a: Evaluated, b: Evaluated, redundancy: int) -> Mix | None:
    need = 1.0 + redundancy * max(_share(a), _share(b))
    max_a = _instances_for(a, math.ceil(need / _share(a)))
    best: Mix | None = None
    step = a.cand.pp if a.cand.pp > 1 else 1
    for n_a in range(0, max_a + 1, step):
        r_a = _replicas(a, n_a)
        got = r_a * _share(a)
        rest = max(need - got, 0.0)
        r_b = math.ceil(rest / _share(b) - 1e-9) if rest > 0 else 0
        if a is b and r_b:
            continue
        chosen = [(ev, r) for ev, r in ((a, r_a), (b, r_b if a is not b else 0)) if r > 0]
        if not chosen:
            continue
        insts = pool_instances(chosen, redundancy)
        cost = sum(n * ev.usd_per_instance_hour for (ev, _), n in zip(chosen, insts, strict=True))
        total_share = sum(r * _share(ev) for ev, r in chosen)
        parts = tuple(MixPart(ev, n, r, r * _share(ev) / total_share)
                      for (ev, r), n in zip(chosen, insts, strict=True))
        if best is None or cost < best.usd_per_hour - 1e-9:
            best = Mix(parts, cost)
    return best
