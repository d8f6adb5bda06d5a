"""One model replica's configuration (model, GPU, precision, parallelism, engine and its flags): what
memory_fit, the step model and the load model are asked about. No units beyond counts; the engine
limits (max_num_seqs, max_num_batched_tokens) are per replica."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sizing.catalog.records import ModelArch
    from sizing.perf.spec_decode import SpecDecode


@dataclass(frozen=True)
class ReplicaConfig:
    """One model replica: tp × pp GPUs of one type. `interconnect` None derives it from the GPU:
    NVLink when gpus.csv lists an NVLink bandwidth (A100, H100, H200, B200: p-family), else PCIe
    (A10G, L4, L40S: g-family). Engine limits None use engines.csv defaults. `cuda_graphs` False is
    vLLM --enforce-eager / SGLang --disable-cuda-graph; `async_scheduling` is vLLM
    --async-scheduling (CPU scheduling overlaps the GPU step). `awq_marlin` False is an AWQ checkpoint
    served with `--quantization awq` (the unfused AWQ kernels, not Marlin; sizing.perf.step
    engines.csv awq_unfused_dequantize_min_tokens); llmcap renders nothing else, so only measured rows set it.
    `fabric` / `fabric_gbps`: the network between the nodes of a multi-node replica (pp > 1, one stage per
    node), "efa" or "ena" at Gbit/s per node (sizing.perf.fabric.node_fabric); None: the stages share a node,
    or no inter-node term is modelled. `engine_version`: (major, minor) of a measured run's engine, None
    for llmcap's own pinned engine. `prefill_only_steps`: the engine's scheduler never decodes while prompts
    wait (a prefill-priority scheduler without mixed batches)."""

    model: ModelArch
    gpu: str
    precision: str
    tp: int = 1
    pp: int = 1
    kv_cache_dtype: str = "auto"
    engine: str = "vllm"
    interconnect: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    cuda_graphs: bool = True
    async_scheduling: bool = False
    awq_marlin: bool = True
    fabric: str | None = None
    fabric_gbps: float | None = None
    # (major, minor) of the engine's version where a measurement names it (sizing/data/engine_kernels.csv:
    # kernels per layer of an early engine's path); None: the current engine llmcap renders
    engine_version: tuple[int, int] | None = None
    # the engine runs prompts in prefill-only steps and decodes only when none wait (vLLM V0 without chunked
    # prefill, SGLang 0.4 without --enable-mixed-chunk: sizing/data/engine_prefill_budget.csv); measured rows
    # set it, llmcap's own engine mixes decodes into its prefill steps
    prefill_only_steps: bool = False
    # speculative decoding (vLLM --speculative-config, SGLang --speculative-algorithm); None: plain decoding.
    # Measured rows set it (bench/calib_rows.py); llmcap renders none
    spec: SpecDecode | None = None
