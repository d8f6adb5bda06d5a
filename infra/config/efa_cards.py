"""EFA network cards per instance type (infra/data/efa_network_cards.csv, from DescribeInstanceTypes), and
which plan pools run over EFA: the one decision the launch template's interfaces (infra/aws/efa.py), the pods'
`vpc.amazonaws.com/efa` requests (infra/kubernetes/serving.py), the EFA device plugin (infra/kubernetes/
efa_plugin.py) and the fit check share. Pure: no pulumi import.

A pool runs on EFA when its replica spans several nodes and the plan put EFA on its nodes (Pool.inter_node_fabric
"efa", or "efa-sockets" where the engine image has no aws-ofi-nccl; sizing/perf/fabric.py: the instance type has
EFA) and this file lists the type's cards. A plan saved before the plan said which fabric it assumed ("") gets
no EFA, and the fit check refuses its multi-node pool with the fix (re-plan).

The EFA device plugin advertises one `vpc.amazonaws.com/efa` device per EFA interface it finds on the node
(aws-efa-k8s-device-plugin; EKS user guide "Run machine learning training on Amazon EKS with Elastic Fabric
Adapter": "vpc.amazonaws.com/efa: 32" in the p5.48xlarge example pod's requests and limits).
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sizing.plan import Pool

DATA = Path(__file__).parent.parent / "data" / "efa_network_cards.csv"
EFA_RESOURCE = "vpc.amazonaws.com/efa"


@dataclass(frozen=True)
class EfaCards:
    instance_type: str
    network_cards: int  # one EFA interface per card
    max_efa_interfaces: int
    source: str


@functools.cache
def efa_cards() -> dict[str, EfaCards]:
    """instance type -> its EFA network cards (infra/data/efa_network_cards.csv)."""
    with DATA.open(newline="") as f:
        return {r["instance_type"]: EfaCards(r["instance_type"], int(r["network_cards"]),
                                             int(r["max_efa_interfaces"]), r["source"])
                for r in csv.DictReader(f)}


def efa_interfaces(instance_type: str) -> int:
    """EFA interfaces the launch template attaches to a node of this type: one per network card, at most
    the type's MaximumEfaInterfaces (0 for a type this file does not list)."""
    c = efa_cards().get(instance_type)
    return min(c.network_cards, c.max_efa_interfaces) if c else 0


EFA_FABRICS = ("efa", "efa-sockets")  # Pool.inter_node_fabric values with EFA attached (sizing/perf/fabric.py)


def pool_uses_efa(pool: Pool) -> bool:
    """A multi-node pool whose plan put EFA on its nodes (whether or not its engine image lets NCCL use it), on a
    type whose cards are known."""
    return (pool.nodes_per_replica > 1 and pool.inter_node_fabric in EFA_FABRICS
            and efa_interfaces(pool.instance_type) > 0)


def efa_per_pod(pool: Pool) -> int:
    """`vpc.amazonaws.com/efa` one serving pod requests and limits: every interface of its node (one pod per
    node in a multi-node pool), 0 when the pool does not run over EFA."""
    return efa_interfaces(pool.instance_type) if pool_uses_efa(pool) else 0
