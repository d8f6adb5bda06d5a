"""The checkpoint a pool downloads: its pinned Hugging Face revision and its size on disk. The one
place that answers "how big is it" (exact safetensors bytes where recorded, else an estimate).

Data: sizing/data/checkpoints.csv (hf_id, revision, safetensors_bytes, source, as_of), read through
the Catalog so a `--catalog DIR` override can pin revisions. Fallback estimate: the weights of one model
copy in the checkpoint's format (sizing/memory.py weight_bytes_per_replica) × (1 + checkpoint_size_margin,
sizing/data/platform.csv): nominal parameter counts understate the exact ones (Llama-3.1-70B "70B" is
~131.4 GiB of BF16 safetensors, 70.55e9 parameters; 405B ~756 GiB), and quantized checkpoints carry
scales and zeros beyond their weight bits.
Units: bytes and GiB (2^30) of one full checkpoint.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.memory import GIB
from sizing.platform_defaults import number

if TYPE_CHECKING:
    from sizing.catalog import Catalog, ModelArch, PrecisionFormat

CHECKPOINTS_FILE = "checkpoints.csv"


@dataclass(frozen=True)
class CheckpointFacts:
    hf_id: str
    revision: str | None  # a Hub commit SHA; None = not pinned (the hub's main branch)
    safetensors_bytes: int | None  # exact total of the .safetensors files; None = unknown
    source: str


def load_checkpoint_facts(cat: Catalog) -> dict[str, CheckpointFacts]:
    path = cat._path(CHECKPOINTS_FILE)
    with path.open(newline="", encoding="utf-8") as f:
        return {r["hf_id"]: CheckpointFacts(r["hf_id"], r["revision"].strip() or None,
                                            int(r["safetensors_bytes"]) if r["safetensors_bytes"].strip() else None,
                                            r["source"])
                for r in csv.DictReader(f)}


def checkpoint_facts(cat: Catalog, hf_id: str) -> CheckpointFacts:
    facts = getattr(cat, "_checkpoint_facts", None)
    if facts is None:
        facts = load_checkpoint_facts(cat)
        object.__setattr__(cat, "_checkpoint_facts", facts)
    return facts.get(hf_id) or CheckpointFacts(hf_id, None, None, "not in checkpoints.csv")


def estimated_checkpoint_bytes(model: ModelArch, fmt: PrecisionFormat) -> float:
    """params × bytes per parameter of the format (16-bit embeddings where the format keeps them),
    plus the stated margin."""
    from sizing.memory import weight_bytes_per_replica

    return weight_bytes_per_replica(model, fmt) * (1.0 + number("checkpoint_size_margin"))


@dataclass(frozen=True)
class CheckpointSize:
    bytes: float
    exact: bool  # True: recorded safetensors bytes; False: the estimate with its margin
    how: str

    @property
    def gib(self) -> float:
        return self.bytes / GIB


def checkpoint_size(cat: Catalog, hf_id: str, model: ModelArch, fmt: PrecisionFormat) -> CheckpointSize:
    """Size of the checkpoint `hf_id` (the one a pool serves), stored in format `fmt`."""
    facts = checkpoint_facts(cat, hf_id)
    if facts.safetensors_bytes:
        return CheckpointSize(float(facts.safetensors_bytes), True, f"safetensors bytes ({CHECKPOINTS_FILE})")
    exact_model = getattr(model, "checkpoint_bytes", None)  # exact size recorded with the model, if any
    if exact_model and hf_id == model.hf_id and fmt.weight_bits >= 16:
        return CheckpointSize(float(exact_model), True, "safetensors bytes (models.csv)")
    margin = number("checkpoint_size_margin")
    return CheckpointSize(estimated_checkpoint_bytes(model, fmt), False,
                          f"parameters × {fmt.name} bytes + {margin:.0%} margin (no recorded size)")


# --- where one copy lives on a GPU node ---------------------------------------------------------

def nodefs_eviction_fraction() -> float:
    """The kubelet evicts pods when its filesystem has less than this fraction free (nodeadm
    evictionHard nodefs.available 10%; sizing/data/node_allocatable.csv)."""
    from sizing.allocatable import allocatable_terms

    return allocatable_terms()["eviction_hard_nodefs_fraction"]


def nvme_gib(local_nvme_gb: int) -> float:
    """The instance store in GiB (instances.csv lists decimal GB)."""
    return local_nvme_gb * 1e9 / GIB


def ephemeral_on_nvme(local_nvme_gb: int, instance_store: bool) -> bool:
    """nodeadm's RAID0 local-storage strategy moves containerd and the kubelet (emptyDirs) onto the
    instance store when llmcap:deployment.model_cache_on_instance_store is set and the type has one."""
    return instance_store and local_nvme_gb > 0


def usable_ephemeral_gib(disk_gib: float) -> float:
    """What pods can fill on the kubelet's filesystem before the hard eviction threshold (GiB)."""
    return disk_gib * (1.0 - nodefs_eviction_fraction())


def cache_fits_nvme(local_nvme_gb: int, model_cache_gib: float, instance_store: bool) -> bool:
    """One model copy and the vLLM image fit the instance store below the eviction threshold."""
    if not ephemeral_on_nvme(local_nvme_gb, instance_store):
        return False
    return usable_ephemeral_gib(nvme_gib(local_nvme_gb)) >= model_cache_gib + number("vllm_image_gib")


def model_cache_gib(checkpoint_gib: float) -> float:
    """The model-cache emptyDir of a node (GiB): the WHOLE checkpoint (`aws s3 sync` copies every
    file of the prefix, on every node of a multi-node replica too) plus headroom."""
    return checkpoint_gib + number("model_cache_headroom_gib")


def root_volume_gib(cache_gib: float, local_nvme_gb: int, instance_store: bool) -> int:
    """Root EBS volume of a GPU node (GiB). On the instance store (RAID0) containerd and emptyDirs
    live on NVMe: the OS margin and the image suffice. Otherwise the root volume holds the image and
    one model copy (the copy Job's scratch, or the cache) below the eviction threshold."""
    image, margin = number("vllm_image_gib"), number("root_volume_margin_gib")
    if ephemeral_on_nvme(local_nvme_gb, instance_store):
        return math.ceil(image + margin)
    return math.ceil((image + cache_gib) / (1.0 - nodefs_eviction_fraction()) + margin)
