"""Which AZ IDs get subnets, and which of those the EKS cluster may use. Pure (no pulumi import):
the program (infra/aws/network.py, infra/program.py) and the deployability check (infra/fit/rules.py)
share it.

EKS user guide, "Subnet requirements for clusters" (infra/data/eks_disallowed_az_ids.csv): "The
subnets can't reside in the following Availability Zones: us-east-1 use1-az3, us-west-1 usw1-az2,
ca-central-1 cac1-az3". "Subnet requirements for nodes" names no such AZ, and nodes may use subnets
the cluster was not created with, so GPU node groups still use a disallowed AZ that offers their type.
"""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sizing.errors import SpecError

if TYPE_CHECKING:
    from sizing.plan import Plan

DISALLOWED_FILE = Path(__file__).parent.parent / "data" / "eks_disallowed_az_ids.csv"
MAX_SUBNET_AZS = 7  # carve_cidrs gives each AZ an eighth of the VPC and keeps the last for public subnets
EKS_MIN_CLUSTER_AZS = 2  # "The subnets must be in at least two different Availability Zones." (same page)


@lru_cache(maxsize=1)
def _disallowed() -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    with DISALLOWED_FILE.open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            out.setdefault(r["region"], set()).add(r["az_id"])
    return {k: frozenset(v) for k, v in out.items()}


def eks_disallowed_az_ids(region: str) -> frozenset[str]:
    """AZ IDs of `region` where an EKS cluster's subnets can't be."""
    return _disallowed().get(region, frozenset())


def disallowed_source() -> str:
    with DISALLOWED_FILE.open(newline="", encoding="utf-8") as f:
        return next(csv.DictReader(f))["source"]


def cluster_az_ids(region: str, az_ids: list[str]) -> list[str]:
    """The subnet AZs the cluster (control-plane ENIs, system nodes) uses: all but the disallowed."""
    bad = eks_disallowed_az_ids(region)
    return [az for az in az_ids if az not in bad]


def choose_az_ids(plan: Plan, offered: dict[str, tuple[str, ...]], region_az_ids: list[str],
                  max_azs: int) -> list[str]:
    """AZ IDs for the subnets: those offering the most planned instance types first (up to
    `max_azs`), then one more for any pool still uncovered, then other AZs of the region until the
    cluster has two AZs EKS allows (EKS needs cluster subnets in two AZs even when a GPU type is
    offered in only one, and never in a disallowed AZ ID)."""
    for pool in plan.pools:
        if not offered.get(pool.instance_type):
            raise SpecError(f"{plan.region}: no AZ offers {pool.instance_type} (catalog offerings); "
                            "choose another region or instance type")
    bad = eks_disallowed_az_ids(plan.region)
    served = {az: sum(az in offered[p.instance_type] for p in plan.pools)
              for az in {a for azs in offered.values() for a in azs}}
    # a pool on a reservation or Capacity Block runs in its AZ only: those AZs come first
    pinned = sorted({p.availability_zone_id for p in plan.pools if p.availability_zone_id})
    for pool in plan.pools:
        if pool.availability_zone_id and pool.availability_zone_id not in offered[pool.instance_type]:
            raise SpecError(f"{pool.name}: its reservation {pool.capacity_reservation_id} is in "
                            f"{pool.availability_zone_id}, where the catalog does not offer {pool.instance_type} "
                            f"(offered in {', '.join(offered[pool.instance_type])}); check the reservation's AZ ID")
    # allowed AZs rank before disallowed ones at the same coverage, so the cluster's AZs come first
    rest = [az for az in sorted(served, key=lambda az: (-served[az], az in bad, az)) if az not in pinned]
    chosen = pinned + rest[:max(0, max_azs - len(pinned))]
    for pool in plan.pools:
        if not set(chosen) & set(offered[pool.instance_type]):
            chosen.append(sorted(offered[pool.instance_type], key=lambda az: (az in bad, az))[0])
    for az in sorted(region_az_ids):
        if len(cluster_az_ids(plan.region, chosen)) >= EKS_MIN_CLUSTER_AZS:
            break
        if az not in chosen and az not in bad:
            chosen.append(az)
    if len(cluster_az_ids(plan.region, chosen)) < EKS_MIN_CLUSTER_AZS:
        raise SpecError(f"{plan.region}: the catalog knows fewer than two AZs where EKS allows cluster subnets; "
                        "EKS needs subnets in two")
    if len(chosen) > MAX_SUBNET_AZS:
        raise SpecError(f"{plan.region}: the planned pools need subnets in {len(chosen)} AZs; at most "
                        f"{MAX_SUBNET_AZS} fit the VPC layout")
    return chosen
