"""Spot in a plan: how `purchase: mixed` splits a pool between on-demand and spot, which candidate
it picks, and the caveats a plan states whenever it buys spot (price date, interruptions).

`purchase: mixed` keeps `spot_on_demand_floor` of each pool's replicas (at least one) on-demand and
puts the rest on spot, but only where that is cheaper: a type without a spot price in the catalog,
or whose spot price is not below on-demand, or whose split costs more whole instances than keeping
it all on-demand, stays all on-demand (it is never priced as "spot at the on-demand rate"). The
candidate is the one whose split costs least, so a mixed plan never costs more than the
on-demand-only plan nor more than the spot-only plan's type split at the same floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.planning.candidates import Evaluated, instances_for

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog


@dataclass(frozen=True)
class Split:
    """A pool of `replicas` replicas under purchase mixed; prices in $/instance-hour."""

    on_demand_replicas: int
    spot_replicas: int
    spot_usd_per_instance_hour: float | None  # None: no spot part
    usd_per_hour: float  # the whole pool
    why_no_spot: str = ""  # when spot_replicas == 0


def split(cat: Catalog, ev: Evaluated, replicas: int, region: str, floor: float) -> Split:
    """The cheapest honest split of `replicas` replicas of `ev` (ev's price is the on-demand one)."""
    t = ev.cand.instance.instance_type
    od = ev.usd_per_instance_hour
    all_od = instances_for(ev.cand, replicas) * od
    spot = cat.price(t, region, "spot")
    od_r = min(replicas, max(1, math.ceil(replicas * floor)))
    spot_r = replicas - od_r
    if spot_r <= 0:
        return Split(replicas, 0, None, all_od, "the on-demand floor takes every replica")
    if spot is None:
        return Split(replicas, 0, None, all_od, f"no spot price for {t} in {region} in the catalog")
    if spot.usd_per_hour >= od:
        return Split(replicas, 0, None, all_od, f"spot (${spot.usd_per_hour:,.2f}/h) is not below on-demand "
                                                f"(${od:,.2f}/h) for {t}")
    cost = instances_for(ev.cand, od_r) * od + instances_for(ev.cand, spot_r) * spot.usd_per_hour
    if cost >= all_od:
        return Split(replicas, 0, None, all_od, f"splitting {t}'s replicas over two node groups needs more "
                                                "whole instances than the spot discount saves")
    return Split(od_r, spot_r, spot.usd_per_hour, cost)


def cheapest_for_mixed_purchase(cat: Catalog, feasible: list[Evaluated], region: str, floor: float) -> Evaluated:
    """The feasible candidate whose on-demand/spot split costs least (ties: fewer GPUs, more goodput)."""
    return min(feasible, key=lambda e: (round(split(cat, e, e.replicas, region, floor).usd_per_hour, 6), e.gpus,
                                        -e.gp.output_tokens_per_s))


def spot_notes(cat: Catalog, region: str, pools: list[tuple[str, str, int]]) -> list[str]:
    """Plan warnings when it buys spot: each spot price with its source and date, the interruption
    caveat, and a spot-only plan said so. `pools` holds (instance type, purchase, replicas)."""
    spot = [(t, r) for t, p, r in pools if p == "spot"]
    if not spot:
        return []
    out = []
    for t in sorted({t for t, _ in spot}):
        price = cat.price(t, region, "spot")
        if price is None:
            continue
        dated = not price.as_of.startswith("undated")
        when = f"as of {price.as_of}" if dated else \
            f"an {price.as_of}; run `llmcap catalog refresh` for a dated 7-day median per AZ"
        out.append(f"spot price of {t} in {region}: ${price.usd_per_hour:,.4g}/h, {when} ({price.source})")
    notice = cat.number("spot_interruption_notice_s")
    n_spot = sum(r for _, r in spot)
    n_all = sum(r for _, _, r in pools)
    out.append(f"spot capacity can be reclaimed at any time with a {notice:g} s interruption notice: "
               f"{n_spot} of {n_all} replicas are on spot, so capacity can drop below demand until "
               "replacement nodes are up")
    if n_spot == n_all:
        out.append("every replica is on spot (purchase: spot): one reclaim wave can take the whole service "
                   "down; purchase: mixed keeps spot_on_demand_floor of the replicas on-demand")
    return out
