"""The network between the nodes of a multi-node replica (pipeline stages on different nodes), and the
bytes each engine step sends across it.

Three cases (Pool.inter_node_fabric):
- "efa": the instance type has EFA (instances.csv `efa`), so infra attaches one EFA interface per network card
  (infra/aws/efa.py), AND the engine's pinned image carries libfabric and aws-ofi-nccl (nccl_net_plugins.csv), so
  NCCL runs over EFA: the instance's aggregate network bandwidth (instances.csv `network_gbps`, every card).
- "efa-sockets": EFA is attached but the engine image has no aws-ofi-nccl, so NCCL uses its socket transport
  ("NCCL without an EFA (libfabric) network plugin uses its socket transport", aws-ofi-nccl README) over the one
  interface with an IP address, card 0's: that card's bandwidth (network_cards.csv `primary_card_gbps`).
- "ena": no EFA on the type: TCP sockets on the node's ENA interface, the primary card's bandwidth.
Bandwidths from DescribeInstanceTypes (NetworkCards[DefaultNetworkCardIndex].BaselineBandwidthInGbps). Line rate,
no efficiency factor and no per-message latency: there is no measurement of either to fit one to.

Bytes per token per stage boundary: vLLM's non-last pipeline ranks send the model's IntermediateTensors
(`get_pp_group().send_tensor_dict(output.tensors, all_gather_group=get_tp_group())`, vllm/v1/worker/
gpu_worker.py: each tensor-parallel rank sends a 1/tp slice, the receiver all-gathers), which for the
decoder-only models llmcap serves are `hidden_states` and `residual`
(`make_empty_intermediate_tensors_factory(["hidden_states", "residual"], config.hidden_size)`,
vllm/model_executor/models/llama.py), each `hidden_size` activations in the 16-bit model dtype.

Units: Gbit/s for bandwidths (as EC2 states them), bytes per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import Instance, ModelArch

INTERMEDIATE_TENSORS = 2  # hidden_states and residual
ACTIVATION_BYTES = 2.0  # bf16 / fp16 model dtype


@dataclass(frozen=True)
class NodeFabric:
    """The inter-node network of a multi-node replica: `name` "efa" or "ena", `gbps` Gbit/s per node."""

    name: str
    gbps: float
    source: str

    def describe(self) -> str:
        how = {"efa": "EFA (NCCL over libfabric, aws-ofi-nccl)",
               "efa-sockets": "EFA attached but NCCL over TCP sockets: the engine image has no aws-ofi-nccl",
               "ena": "ENA (NCCL over TCP sockets)"}[self.name]
        return f"over {how}, {self.gbps:,.0f} Gbps per node"


def _primary_card(catalog: Catalog, instance: Instance) -> tuple[float, str] | None:
    cards = catalog.network_cards.get(instance.instance_type)
    if cards is None:
        if instance.network_gbps is None:
            return None
        return instance.network_gbps, (f"instances.csv network_gbps ({instance.source}, {instance.as_of}): no "
                                        "network_cards.csv row")
    return (min(cards.primary_card_gbps, instance.network_gbps or cards.primary_card_gbps),
            f"network_cards.csv primary_card_gbps ({cards.source}, {cards.as_of})")


def node_fabric(catalog: Catalog, instance: Instance, nodes: int, engine: str = "vllm") -> NodeFabric | None:
    """The fabric between the `nodes` nodes of one replica of `engine`; None for a single-node replica."""
    if nodes <= 1:
        return None
    efa = bool(instance.efa and instance.network_gbps)
    if efa and catalog.engine_has_aws_ofi_nccl(engine):
        return NodeFabric("efa", float(instance.network_gbps or 0.0),
                          f"instances.csv network_gbps ({instance.source}, {instance.as_of}); nccl_net_plugins.csv")
    card = _primary_card(catalog, instance)
    if card is None:
        return None
    return NodeFabric("efa-sockets" if efa else "ena", card[0],
                      card[1] + ("; nccl_net_plugins.csv: the engine image has no aws-ofi-nccl" if efa else ""))


def pipeline_bytes_per_token(model: ModelArch) -> float:
    """Bytes one token's intermediate tensors take across one pipeline-stage boundary."""
    return INTERMEDIATE_TENSORS * model.hidden_size * ACTIVATION_BYTES
