"""EFA for multi-node pools (issue 28): which pools use it, and the launch template's interfaces.

Pure builder (no pulumi). A pool whose replica spans several nodes (pipeline parallel over the network)
runs NCCL between nodes; on an instance type with EFA (sizing/data/instances.csv `efa`) the node group
gets one EFA interface per network card (infra/data/efa_network_cards.csv, from DescribeInstanceTypes),
a cluster placement group and a security group whose self rules let EFA traffic through. Without EFA,
NCCL falls back to TCP sockets; the fit check refuses such a pool (infra/fit/rules.py `multi-node-without-efa`).

Interface layout, per the EC2 user guide (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html,
"EFA and ENA interfaces on multi-card instances") as pulumi/pulumi-eks renders it for managed node groups
(nodejs/eks/nodegroups efa.ts): card 0 at device index 0 with interface type `efa` (it carries the node's IP),
every other card at device index 1 with `efa-only` (no IP address: the VPC CNI's pod IPs stay on card 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infra.config.efa_cards import EfaCards, efa_cards, efa_interfaces, pool_uses_efa

__all__ = ["EFA_SOURCE", "EfaCards", "efa_cards", "efa_network_interfaces", "instance_has_efa", "uses_efa"]

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.plan import Pool

EFA_SOURCE = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html (security group, placement group)"


def instance_has_efa(catalog: Catalog, instance_type: str) -> bool:
    inst = catalog.instances.get(instance_type)
    return bool(inst is not None and inst.efa)


def uses_efa(catalog: Catalog, pool: Pool) -> bool:
    """A multi-node pool on EFA (infra/config/efa_cards.py pool_uses_efa: the plan assumed EFA for it): the node
    group gets EFA interfaces and a placement group. `catalog` is unused, kept for the callers' signature."""
    return pool_uses_efa(pool)


def efa_network_interfaces(instance_type: str, security_group_ids: list[Any]) -> list[dict[str, Any]]:
    """The launch template's network_interfaces: one EFA interface per network card (pulumi_aws arg names)."""
    return [{"network_card_index": i, "device_index": 0 if i == 0 else 1,
             "interface_type": "efa" if i == 0 else "efa-only",
             "delete_on_termination": "true", "security_groups": security_group_ids}
            for i in range(efa_interfaces(instance_type))]
