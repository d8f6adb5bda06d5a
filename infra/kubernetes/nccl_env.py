"""NCCL over EFA in the engine container: whether the pool's engine image carries libfabric and aws-ofi-nccl
(infra/data/nccl_net_plugin.yaml, read from each image's Dockerfile) and the environment NCCL then needs, as AWS
documents it (aws-ofi-nccl doc/efa-env-var.md; each variable's rule is quoted in the data file). A pool on EFA
whose image has no plugin gets no EFA environment (NCCL_NET would make NCCL fail at start instead of using
sockets): the fit table says NCCL runs over sockets there. Pure: no pulumi import."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from infra.config.efa_cards import pool_uses_efa
from infra.kubernetes.engines import engine_of

if TYPE_CHECKING:
    from sizing.plan import Pool

DATA = Path(__file__).parent.parent / "data" / "nccl_net_plugin.yaml"


@functools.cache
def _data() -> dict[str, Any]:
    doc = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{DATA}: expected a mapping")
    return doc


def image_has_aws_ofi_nccl(image_key: str) -> bool:
    """The pinned image of `image_key` carries aws-ofi-nccl (true in the data file; false or unread: no)."""
    row = _data()["images"].get(image_key) or {}
    return row.get("aws_ofi_nccl") is True


def nccl_transport(pool: Pool) -> str:
    """How NCCL moves a multi-node pool's traffic: "aws-ofi-nccl (EFA)", "sockets: ..." with why, or "" (one node)."""
    if pool.nodes_per_replica <= 1:
        return ""
    key = engine_of(pool).image_key
    if not pool_uses_efa(pool):
        return "sockets: no EFA on the pool"
    if not image_has_aws_ofi_nccl(key):
        return f"sockets: the {key} image has no aws-ofi-nccl (infra/data/nccl_net_plugin.yaml)"
    return "aws-ofi-nccl (EFA)"


def nccl_efa_env(pool: Pool) -> list[dict[str, str]]:
    """The engine container's NCCL/libfabric environment for a pool on EFA whose image carries the plugin; []
    otherwise."""
    if not pool_uses_efa(pool) or not image_has_aws_ofi_nccl(engine_of(pool).image_key):
        return []
    return [{"name": k, "value": str(v["value"])} for k, v in _data()["environment"].items()]
