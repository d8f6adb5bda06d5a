"""The ONE mapping from a plan pool's vLLM settings to `vllm serve` arguments, shared by the EKS
Deployments/LeaderWorkerSets and the single-server compose file. Every emitted flag is checked
against the allowlist of the pinned vLLM version (infra/data/vllm_flags.yaml); a flag or value the
pinned version does not accept raises VllmArgsError instead of producing a pod that crash-loops.

No pulumi import: infra/compose.py uses this module without the Pulumi SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.config import settings

if TYPE_CHECKING:
    from sizing.plan import Pool, VllmSettings


class VllmArgsError(ValueError):
    """A flag or value that the pinned vLLM version does not accept."""


@dataclass(frozen=True)
class ModelSource:
    """Where vLLM reads the weights: an HF id (hub download), a local path, or an s3:// URI."""

    path: str
    load_format: str | None = None  # e.g. "runai_streamer" for s3:// streaming; None = vLLM's default


@dataclass(frozen=True)
class MultiNode:
    """vLLM's native multi-node mode (multiprocessing backend across nodes)."""

    nnodes: int
    node_rank: str  # an int, or a shell/env expansion such as $(LWS_WORKER_INDEX)
    master_addr: str  # e.g. $(LWS_LEADER_ADDRESS)
    headless: bool  # workers run headless: no API server


def engine_flags(v: VllmSettings) -> list[str]:
    """Plan fields → engine flags. The mapping table of the project: one line per plan field."""
    out = [
        # several names: the pool answers each; the first names responses and metrics (vllm/config/model.py
        # ModelConfig.served_model_name: "If multiple names are provided, the server will respond to any of
        # the provided names. The model name in the model field of a response will be the first name")
        "--served-model-name", v.served_model_name, *v.served_model_aliases,
        "--tensor-parallel-size", str(v.tensor_parallel_size),
        "--pipeline-parallel-size", str(v.pipeline_parallel_size),
        "--max-model-len", str(v.max_model_len),
        "--max-num-seqs", str(v.max_num_seqs),
        "--max-num-batched-tokens", str(v.max_num_batched_tokens),
        "--gpu-memory-utilization", f"{v.gpu_memory_utilization:g}",
        "--kv-cache-dtype", v.kv_cache_dtype,
        "--dtype", v.dtype,
        "--enable-prefix-caching" if v.enable_prefix_caching else "--no-enable-prefix-caching",
    ]
    if v.quantization:
        out += ["--quantization", v.quantization]
    return out


def serve_args(pool: Pool, source: ModelSource, port: int, multi_node: MultiNode | None = None) -> list[str]:
    """Arguments after `vllm serve`: the model, then flags. The API key comes from the VLLM_API_KEY
    environment variable (a Secret), never from the command line, so it does not show in `ps` or events."""
    args = [source.path, "--host", "0.0.0.0", "--port", str(port), *engine_flags(pool.vllm)]
    if source.load_format:
        args += ["--load-format", source.load_format]
    if multi_node is not None:
        args += ["--distributed-executor-backend", "mp", "--nnodes", str(multi_node.nnodes),
                 "--node-rank", multi_node.node_rank, "--master-addr", multi_node.master_addr]
        if multi_node.headless:
            args.append("--headless")
    check_args(args[1:])
    return args


def check_args(args: list[str]) -> None:
    """Raise VllmArgsError for a flag or an enumerated value the pinned version rejects."""
    allow = settings.vllm_flags()
    known = set(allow["flags"])
    choices: dict[str, list[str]] = allow.get("choices", {})
    version = allow["vllm_version"]
    for i, a in enumerate(args):
        if not a.startswith("--"):
            continue
        if a not in known:
            raise VllmArgsError(f"{a}: not a `vllm serve` flag in vLLM {version} (infra/data/vllm_flags.yaml)")
        if a in choices and i + 1 < len(args) and args[i + 1] not in choices[a]:
            raise VllmArgsError(f"{a} {args[i + 1]}: vLLM {version} accepts one of {', '.join(choices[a])}")
        old = allow.get("deprecated_values", {}).get(a, {}).get(args[i + 1]) if i + 1 < len(args) else None
        if old is not None:
            instead = f"; use {old['use']}" if old["use"] else ""
            raise VllmArgsError(f"{a} {args[i + 1]}: deprecated in vLLM {version}{instead} "
                                "(infra/data/vllm_flags.yaml)")
