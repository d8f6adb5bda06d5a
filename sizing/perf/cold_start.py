"""Cold start: how long a new replica takes from the autoscaler's decision to serving, term by term.

Terms (seconds), each from a data row in sizing/data/platform.csv with its source:
- node boot (`node_boot_s`): EC2 launch to Kubernetes Ready, only when the replica needs a new node;
- image pull (`vllm_image_gib` / `image_pull_gbs`): the vLLM image on a node that has not pulled it;
- weights: with a local NVMe cache (`mode="nvme"`, only where the node holds one pod of the pool: one
  copy per node), the S3 sync of the node's checkpoint share (`weights_load_gbs_s3`) then the load from
  NVMe into GPU memory (`weights_load_gbs_nvme`); when streaming (`mode="stream"`, Run:ai streamer from
  S3), one S3 read per pod, the node's pods sharing its S3 throughput (`weights_load_gbs_s3` is per node);
- engine start (`engine_init_s`): CUDA context, torch.compile and CUDA-graph capture.
They run one after another (kubelet pulls a container's image when it starts it; the sync is an
init container), so the cold start is their sum. GB = 1e9 bytes; sizes in GiB are converted.

Scope: one replica (a multi-node replica's nodes start in parallel, each with its stage's share).
`cold_start(pool)` is the one function infra/ and the reports call; pass `mode` where the caller knows
how the weights are loaded (sizing.planning.node_storage.loading_mode), else it is inferred from the node's NVMe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.catalog.platform import number
from sizing.perf.memory import GIB
from sizing.perf.weights_mode import pods_per_node, weights_mode

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.plan import Pool


@dataclass(frozen=True)
class Term:
    name: str
    seconds: float
    how: str  # the arithmetic, e.g. "10 GiB at 0.04 GB/s"


@dataclass(frozen=True)
class ColdStart:
    terms: tuple[Term, ...]

    @property
    def total_s(self) -> float:
        """A replica on a new node: every term."""
        return sum(t.seconds for t in self.terms)

    @property
    def pod_on_warm_node_s(self) -> float:
        """A replica restarting on a node that is up and has the image: weights and engine only."""
        return sum(t.seconds for t in self.terms if t.name not in ("node boot", "image pull"))

    def summary(self) -> str:
        parts = ", ".join(f"{t.name} {t.seconds:,.0f} s" for t in self.terms)
        return f"{_minutes(self.total_s)} on a new node ({parts})"


def _minutes(s: float) -> str:
    return f"{s / 60:.1f} min" if s >= 90 else f"{s:.0f} s"


def default_mode(pool: Pool) -> str:
    """As the planner chooses (sizing.planning.node_storage.loading_mode), from the pool alone."""
    fits = bool(pool.local_nvme_gb and pool.local_nvme_gb >= pool.model_cache_gib_per_node * GIB / 1e9)
    return weights_mode(pods_per_node(pool), fits)


def cold_start(pool: Pool, mode: str | None = None, catalog: Catalog | None = None) -> ColdStart:
    """The cold start of one replica of `pool` on a new node (module docstring); the terms from
    `catalog`'s platform.csv (the planner's), else the bundled one."""
    mode = {"s3-stream": "stream"}.get(mode or "", mode) or default_mode(pool)
    if mode not in ("nvme", "stream"):
        raise ValueError(f"mode {mode!r}: nvme, stream or s3-stream")
    image_gib = number("vllm_image_gib", catalog)
    s3, nvme = number("weights_load_gbs_s3", catalog), number("weights_load_gbs_nvme", catalog)
    pull = number("image_pull_gbs", catalog)
    gb = pool.model_cache_gib_per_node * GIB / 1e9
    terms = [Term("node boot", number("node_boot_s", catalog), "EC2 launch to node Ready"),
             Term("image pull", image_gib * GIB / 1e9 / pull, f"{image_gib:g} GiB at {pull:g} GB/s")]
    if mode == "nvme":
        terms += [Term("S3 sync", gb / s3, f"{gb:,.1f} GB at {s3:g} GB/s"),
                  Term("weights load", gb / nvme, f"{gb:,.1f} GB from NVMe at {nvme:g} GB/s")]
    else:
        pods = pods_per_node(pool)
        shared = f", {pods} pods share the node's" if pods > 1 else ""
        terms.append(Term("weights stream", gb * pods / s3, f"{gb:,.1f} GB from S3 at {s3:g} GB/s{shared}"))
    terms.append(Term("engine start", number("engine_init_s", catalog), "CUDA context, torch.compile, CUDA graphs"))
    return ColdStart(tuple(terms))


BEFORE_ENGINE_TERMS = ("node boot", "image pull", "S3 sync")  # the terms before the engine's container runs


def before_engine_s(pool: Pool, mode: str) -> float:
    """Seconds before the vLLM container starts on a new node: node boot, the image pull and, with a
    local cache (`mode` nvme), the init container's S3 sync of the checkpoint. A startup probe only
    starts counting once the container runs."""
    return sum(t.seconds for t in cold_start(pool, mode).terms if t.name in BEFORE_ENGINE_TERMS)
