"""The network between the nodes of a multi-node replica (pipeline stages on different nodes), and the
bytes each engine step sends across it.

Over EFA (issue 28 item 3): infra attaches one EFA interface per network card to a multi-node pool on an
instance type with EFA (instances.csv `efa`; infra/aws/efa.py), and NCCL runs over libfabric through
aws-ofi-nccl, so the stage boundary gets the instance's aggregate network bandwidth (instances.csv
`network_gbps`, every card). Without EFA the node has its one ENA interface on the primary network card, and
NCCL falls back to TCP sockets over it: that card's bandwidth (network_cards.csv `primary_card_gbps`, from
DescribeInstanceTypes NetworkCards[DefaultNetworkCardIndex].BaselineBandwidthInGbps). Line rate, no
efficiency factor and no per-message latency: there is no measurement of either to fit one to.

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
        how = "EFA (NCCL over libfabric, aws-ofi-nccl)" if self.name == "efa" else "ENA (NCCL over TCP sockets)"
        return f"over {how}, {self.gbps:,.0f} Gbps per node"


def node_fabric(catalog: Catalog, instance: Instance, nodes: int) -> NodeFabric | None:
    """The fabric between the `nodes` nodes of one replica; None for a single-node replica."""
    if nodes <= 1:
        return None
    if instance.efa and instance.network_gbps:
        return NodeFabric("efa", instance.network_gbps,
                          f"instances.csv network_gbps ({instance.source}, {instance.as_of})")
    cards = catalog.network_cards.get(instance.instance_type)
    if cards is None:
        if instance.network_gbps is None:
            return None
        return NodeFabric("ena", instance.network_gbps,
                          f"instances.csv network_gbps ({instance.source}, {instance.as_of}): no network_cards.csv row")
    gbps = min(cards.primary_card_gbps, instance.network_gbps or cards.primary_card_gbps)
    return NodeFabric("ena", gbps, f"network_cards.csv primary_card_gbps ({cards.source}, {cards.as_of})")


def pipeline_bytes_per_token(model: ModelArch) -> float:
    """Bytes one token's intermediate tensors take across one pipeline-stage boundary."""
    return INTERMEDIATE_TENSORS * model.hidden_size * ACTIVATION_BYTES
