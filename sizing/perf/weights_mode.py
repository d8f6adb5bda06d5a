"""How a node's serving pods get the weights: at most one copy per node (issue 32). Imports nothing of
llmcap at run time, so the planner's node storage and the cold start both read it without a longer chain."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sizing.plan import Pool


def pods_per_node(pool: Pool) -> int:
    """Serving pods of the pool on one node: its replicas per instance, or 1 when a replica spans nodes."""
    return 1 if pool.nodes_per_replica > 1 else max(pool.replicas_per_instance, 1)


def weights_mode(pods: int, cache_fits_nvme: bool) -> str:
    """`nvme` (a local copy) only where the node holds one pod of the pool and the copy fits its NVMe; a
    node packed with several pods streams them from S3 (the Run:ai streamer, vLLM `--load-format
    runai_streamer`), since pods cannot share a node directory under Pod Security `restricted` (no
    hostPath) and an emptyDir is per pod: one copy per pod. Returns `nvme` or `stream`."""
    return "nvme" if pods == 1 and cache_fits_nvme else "stream"
