"""Time of one tensor-parallel all-reduce, seconds, per the engine's algorithm choice.

Scope: one all-reduce of a step's activations (`tokens` x hidden x 2 bytes) across `tp` GPUs of one node.

Default (vLLM, SGLang, TGI and PCIe links): an NCCL ring, 2(tp-1) latency-bound hops plus
2(tp-1)/tp of the message over the link per GPU.

TensorRT-LLM over NVLink (its allreduce plugin, strategy AUTO, the default of trtllm-build 0.11-0.13) runs
its own peer-to-peer kernels while the message fits the IPC workspace, read in
cpp/tensorrt_llm/plugins/ncclPlugin/allreducePlugin.cpp `AllreducePlugin::selectImplementation`:

    if (messageSizeBytes <= maxWorkspaceSize) {
        if (worldSize <= 2) strat = ONESHOT;
        else if (worldSize <= 4) { if (messageSizeBytes < 1 * 1000 * 1000) strat = ONESHOT; else strat = TWOSHOT; }
        else { if (messageSizeBytes < 500 * 1000) strat = ONESHOT; else strat = TWOSHOT; }
    }   // otherwise NCCL

with cpp/tensorrt_llm/common/customAllReduceUtils.h `getMaxRequiredWorkspaceSize`: 16 * 1000 * 1000 bytes
for worldSize <= 2, else 8 * 1000 * 1000. The kernels (cpp/tensorrt_llm/kernels/customAllReduceKernels.cu):
ONESHOT passes one barrier across the peers, then every GPU reads the whole message from each of the
tp - 1 peers and sums it; TWOSHOT passes a barrier, reduce-scatters (each GPU reads its 1/tp slice from
the tp - 1 peers), passes a second barrier and all-gathers (reads the other tp - 1 slices): 2(tp-1)/tp of
the message, as a ring, but two barriers instead of 2(tp-1) hops. A barrier plus the remote read after it
is priced as two of the calibrated NVLink hop latencies (so a TP2 one-shot costs what a TP2 ring does).
"""

from __future__ import annotations

TRTLLM_ENGINE = "tensorrt-llm"
# customAllReduceUtils.h getMaxRequiredWorkspaceSize (bytes)
WORKSPACE_BYTES_TP2 = 16 * 1000 * 1000
WORKSPACE_BYTES_WIDER = 8 * 1000 * 1000
# allreducePlugin.cpp selectImplementation: ONESHOT below these message sizes (bytes), by width
ONESHOT_MAX_BYTES_TP4 = 1 * 1000 * 1000
ONESHOT_MAX_BYTES_TP8 = 500 * 1000
HOPS_PER_BARRIER = 2.0  # the barrier's flag exchange and the peer read behind it, in ring-hop latencies


def trtllm_strategy(message_bytes: float, tp: int) -> str:
    """TensorRT-LLM's AUTO choice for one all-reduce of `message_bytes` bytes over `tp` GPUs:
    "oneshot", "twoshot" or "nccl" (allreducePlugin.cpp selectImplementation)."""
    workspace = WORKSPACE_BYTES_TP2 if tp <= 2 else WORKSPACE_BYTES_WIDER
    if message_bytes > workspace:
        return "nccl"
    if tp <= 2:
        return "oneshot"
    limit = ONESHOT_MAX_BYTES_TP4 if tp <= 4 else ONESHOT_MAX_BYTES_TP8
    return "oneshot" if message_bytes < limit else "twoshot"


def allreduce_s(message_bytes: float, tp: int, link_bytes_per_s: float, hop_latency_s: float,
                custom_p2p: bool) -> float:
    """Seconds of one all-reduce of `message_bytes` (bytes) over `tp` GPUs with `link_bytes_per_s` per GPU per
    direction and `hop_latency_s` per ring hop; `custom_p2p`: TensorRT-LLM's kernels over NVLink."""
    if tp <= 1:
        return 0.0
    ring_bytes = 2.0 * (tp - 1) / tp * message_bytes
    strategy = trtllm_strategy(message_bytes, tp) if custom_p2p else "nccl"
    if strategy == "oneshot":
        return HOPS_PER_BARRIER * hop_latency_s + (tp - 1) * message_bytes / link_bytes_per_s
    if strategy == "twoshot":
        return 2.0 * HOPS_PER_BARRIER * hop_latency_s + ring_bytes / link_bytes_per_s
    return 2.0 * (tp - 1) * hop_latency_s + ring_bytes / link_bytes_per_s
