"""NCCL over EFA in the engine container, as AWS documents it (aws-ofi-nccl doc/efa-env-var.md; each variable's rule
is quoted in infra/data/nccl_net_plugin.yaml). Whether the pool's engine image carries libfabric and aws-ofi-nccl
is the plan's (Pool.inter_node_fabric "efa", from sizing/data/nccl_net_plugins.csv): a pool on EFA whose image has
no plugin ("efa-sockets") gets no EFA environment (NCCL_NET would make NCCL fail at start instead of using
sockets), and the plan and the fit table say NCCL runs over sockets there. Pure: no pulumi import."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from infra.config.efa_cards import pool_uses_efa

if TYPE_CHECKING:
    from sizing.plan import Pool

DATA = Path(__file__).parent.parent / "data" / "nccl_net_plugin.yaml"


@functools.cache
def _data() -> dict[str, Any]:
    doc = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{DATA}: expected a mapping")
    return doc


def nccl_over_efa(pool: Pool) -> bool:
    """A pool on EFA whose engine image carries aws-ofi-nccl (the plan's fabric "efa")."""
    return pool_uses_efa(pool) and pool.inter_node_fabric == "efa"


def nccl_transport(pool: Pool) -> str:
    """How NCCL moves a multi-node pool's traffic: "aws-ofi-nccl (EFA)", "sockets: ..." with why, or "" (one node)."""
    if pool.nodes_per_replica <= 1:
        return ""
    if nccl_over_efa(pool):
        return "aws-ofi-nccl (EFA)"
    if pool_uses_efa(pool):
        return f"sockets: the {pool.engine} image has no aws-ofi-nccl (sizing/data/nccl_net_plugins.csv)"
    return "sockets: no EFA on the pool"


def nccl_efa_env(pool: Pool) -> list[dict[str, str]]:
    """The engine container's NCCL/libfabric environment for a pool whose NCCL runs over EFA; [] otherwise."""
    if not nccl_over_efa(pool):
        return []
    return [{"name": k, "value": str(v["value"])} for k, v in _data()["environment"].items()]
