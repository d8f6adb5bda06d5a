"""GPU capacity a plan can get, and the rate it pays for it (issue 28).

`llmcap:hardware.capacity` names reservations (On-Demand Capacity Reservations) and Capacity Blocks for
ML. A pool whose instance type has one is placed on it first, up to its instance count; the replicas
beyond it go to a second pool on `purchase` (on-demand or spot). On-demand instances are paid at the
`commitment` rate (a Savings Plan or reserved rate from prices.csv) when the catalog has it, else at
the on-demand rate with a warning: a missing rate is said, never invented. An ODCR is paid at the
on-demand rate whether used or not; a Capacity Block at its own per-instance-hour rate (the stack's
`usd_per_hour`, else the catalog's `capacity-block` row) for the block's length.

`purchase_options` prices the planned fleet under every purchase option side by side, each with the
source and date of its rates. Prices in $/instance-hour; months of 730 h (sizing.cost.money).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.cost.money import usd_per_million_tokens, usd_per_month
from sizing.plan import PurchaseOption

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.planning.candidates import Evaluated
    from sizing.spec import CapacityReservation, HardwareSpec

# the purchase options a plan compares, in the order it prints them (prices.csv `purchase` values)
OPTIONS = ("on-demand", "spot", "reserved-1yr", "reserved-3yr", "savings-plan-1yr", "savings-plan-3yr",
           "capacity-block")


@dataclass(frozen=True)
class Rate:
    """One instance type's price under a purchase option: $/instance-hour, the prices.csv kind it is,
    and a warning when the asked-for rate was missing and another stood in."""

    usd_per_hour: float
    basis: str
    warning: str = ""


def reservation_for(hw: HardwareSpec, instance_type: str) -> CapacityReservation | None:
    return next((c for c in hw.capacity if c.instance_type == instance_type), None)


def reserved_replicas(ev: Evaluated, res: CapacityReservation, replicas: int) -> int:
    """Replicas of `ev` the reservation's `count` instances hold (whole replicas, at most `replicas`)."""
    c = ev.cand
    held = res.count // c.pp if c.pp > 1 else res.count * c.replicas_per_instance
    return min(replicas, held)


def how_to_get(kind: str, instance_types: list[str], region: str) -> str:
    """Where a missing rate comes from: the refresh flag that fetches it, or that none does."""
    fetch = {"on-demand": "", "spot": "", "savings-plan-1yr": " --savings-plans",
             "savings-plan-3yr": " --savings-plans",
             "capacity-block": "".join(f" --capacity-block {t}" for t in instance_types)}
    if kind not in fetch:
        return "no refresh fetches it; a prices.csv row with its source in a --catalog DIR adds it"
    return f"`llmcap catalog refresh --region {region}{fetch[kind]}` fetches it"


def _missing(kind: str, instance_type: str, region: str) -> str:
    return (f"no {kind} rate for {instance_type} in {region} in the catalog (not in the bundled data; "
            f"{how_to_get(kind, [instance_type], region)})")


def reservation_rate(cat: Catalog, res: CapacityReservation, region: str, on_demand: float) -> Rate:
    """An ODCR bills the on-demand rate; a Capacity Block the rate the stack gives, else the catalog's."""
    if res.kind == "reservation":
        return Rate(on_demand, "on-demand")
    if res.usd_per_hour is not None:
        return Rate(res.usd_per_hour, "stack")
    p = cat.price(res.instance_type, region, "capacity-block")
    if p is not None:
        return Rate(p.usd_per_hour, "capacity-block")
    return Rate(on_demand, "on-demand", _missing("capacity-block", res.instance_type, region)
                + f"; capacity block {res.id} priced at the on-demand rate: set its usd_per_hour in llmcap:hardware")


def commitment_rate(cat: Catalog, instance_type: str, region: str, commitment: str, on_demand: float) -> Rate:
    """The rate on-demand instances are paid at under `commitment` (none: on-demand)."""
    if commitment == "none":
        return Rate(on_demand, "on-demand")
    p = cat.price(instance_type, region, commitment)
    if p is not None:
        return Rate(p.usd_per_hour, commitment)
    return Rate(on_demand, "on-demand", _missing(commitment, instance_type, region)
                + f"; {instance_type} priced at the on-demand rate")


def ends_line(kind: str, reservation_id: str, end: str) -> str:
    """When a reservation ends, in the words the plan, its JSON and the PR comment all use."""
    name = "capacity block" if kind == "capacity-block" else "capacity reservation"
    return f"{name} {reservation_id} ends {end}; after that the pool has no capacity"


def capacity_notes(hw: HardwareSpec, pools: list[tuple[str, str, int, float]]) -> list[str]:
    """Plan warnings for each reservation: when it ends (after that the pool has no capacity), and
    instances held but not used (paid whether used or not). `pools`: (instance type, purchase,
    desired instances, $/instance-hour) of each pool on a reservation."""
    out = []
    for res in hw.capacity:
        name = "capacity block" if res.kind == "capacity-block" else "capacity reservation"
        used = [(n, usd) for t, purchase, n, usd in pools if t == res.instance_type and purchase == res.kind]
        if not used:
            out.append(f"{name} {res.id} ({res.count} × {res.instance_type}) matches no planned pool; it is paid "
                       "for but unused: drop it from llmcap:hardware.capacity or allow its instance type")
            continue
        n, usd = used[0]
        if res.end is not None:
            out.append(ends_line(res.kind, res.id, res.end.isoformat()))
        if res.kind == "capacity-block":
            # EKS user guide, capacity-blocks-mng / capacity-blocks: "When upgrading a managed node group with
            # Capacity Blocks, set the desired size to 0"; drain by scaling to zero "more than 30 minutes
            # before the Capacity Block reservation end time"
            out.append(f"{name} {res.id}: set the node group's desired size to 0 before upgrading it, and scale it to "
                       "zero more than 30 minutes before the block ends so its pods drain (EKS user guide, "
                       "Capacity Blocks for ML)")
        if n < res.count:
            out.append(f"{name} {res.id}: the plan uses {n} of its {res.count} {res.instance_type} instances; "
                       f"the other {res.count - n} are paid whether used or not "
                       f"(${usd_per_month((res.count - n) * usd):,.0f}/month)")
    return out


def purchase_options(cat: Catalog, region: str, fleet: dict[str, int], output_tokens_per_s: float
                     ) -> list[PurchaseOption]:
    """The fleet (instance type -> desired instances) priced under each option in OPTIONS. An option
    without a rate for some type has no total, and says which type and how to get the rate."""
    out = []
    for option in OPTIONS:
        usd_h, sources, dates, missing = 0.0, set(), set(), []
        for t, n in sorted(fleet.items()):
            p = cat.price(t, region, option)
            if p is None:
                missing.append(t)
                continue
            usd_h += n * p.usd_per_hour
            sources.add(p.source)
            dates.add(p.as_of)
        if missing:
            out.append(PurchaseOption(
                option=option, usd_per_month=None, usd_per_million_output_tokens=None,
                note=f"not in the bundled data for {', '.join(missing)} in {region} "
                     f"({how_to_get(option, missing, region)})"))
            continue
        out.append(PurchaseOption(
            option=option, usd_per_month=round(usd_per_month(usd_h), 2),
            usd_per_million_output_tokens=round(usd_per_million_tokens(usd_h, output_tokens_per_s), 4),
            source="; ".join(sorted(sources)), as_of="; ".join(sorted(dates)),
            note="paid for the block's length, whether used or not" if option == "capacity-block" else ""))
    return out
