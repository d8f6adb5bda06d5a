"""How big a model's checkpoint is, and where that figure comes from.

`checkpoint_bytes(model, precision)` is the one place other modules ask (storage sizing, the
deploy fit check, the plan's assumption line). In order of trust:

1. the checkpoint's own safetensors metadata (`huggingface_hub.HfApi.get_safetensors_metadata`:
   the header of every .safetensors file, read without downloading weights), cached per
   repo@revision under ~/.cache/llmcap/checkpoints/ (written atomically;
   sizing.catalog.checkpoint_metadata). The cache is read
   offline; the hub is asked only with `fetch=True` (`llmcap` does so when it fetches a model's
   config.json from the hub anyway) and never when HF_HUB_OFFLINE is set.
2. offline, the parameter count (model card or config-derived, see `ModelArch.params_source`)
   times the bytes per parameter of the checkpoint's precision. Known error: within ~2% of the
   published counts for every family in tests/data/configs (tests/test_architectures.py);
   multimodal checkpoints also hold a vision tower that is not counted.

Units: bytes (not GiB).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.catalog.checkpoint_metadata import METADATA_SOURCE, _is_hub_id, cached_metadata, fetch_metadata
from sizing.catalog.platform import number
from sizing.catalog.records import CheckpointFacts
from sizing.perf.memory import GIB

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import ModelArch, PrecisionFormat


def checkpoint_bytes(model: ModelArch, precision: str = "bf16", repo_id: str | None = None,
                     revision: str = "main", fetch: bool = False, *, catalog: Catalog) -> tuple[float, str]:
    """(bytes of the checkpoint files' tensors, where the figure comes from) for the checkpoint
    of `model` in `precision` (the precision its files are stored in; pass the pre-quantized
    checkpoint's id as `repo_id` when it is another repo). MTP layers are included: they are in
    the files even when the engine skips them."""
    repo = repo_id or model.hf_id
    meta = cached_metadata(repo, revision) if _is_hub_id(repo) else None
    if meta is None and fetch:
        meta = fetch_metadata(repo, revision)
    if meta is not None:
        return float(meta.total_bytes), (f"{METADATA_SOURCE} of {repo}@{revision}, read {meta.fetched_at}: "
                                         f"{meta.parameters / 1e9:,.2f}B parameters")
    from sizing.perf.memory import weight_bytes_per_replica

    cat = catalog
    stored = precision
    if repo == model.hf_id and model.checkpoint_quant == "fp8" and precision in ("bf16", "fp16"):
        stored = "fp8"  # the published checkpoint is FP8 (its config's quantization_config)
    b = weight_bytes_per_replica(model, cat.precision(stored), include_mtp=True)
    how = "rounded as published" if model.params_source == "model card" else "within ~2% of published counts"
    return b, (f"{model.params_total_b + model.mtp_params_b:,.2f}B parameters from the {model.params_source} "
               f"({how}) at {stored}; offline estimate, no checkpoint metadata cached")


def model_size_line(model: ModelArch, precision: str, catalog: Catalog) -> str:
    """The plan's assumption line: the model's size and which source it came from."""
    b, source = checkpoint_bytes(model, precision, catalog=catalog)
    return f"model size: {model.hf_id} checkpoint {b / 2**30:,.1f} GiB from {source}"


# --- the checkpoint a pool downloads: pinned revision, size for storage, where the copy lives -------
# sizing/data/checkpoints.csv (hf_id, revision, safetensors_bytes, source, as_of), read through the
# Catalog so a `--catalog DIR` override can pin revisions or record sizes. Storage figures in GiB (2^30).

CHECKPOINTS_FILE = "checkpoints.csv"


def checkpoint_facts(cat: Catalog, hf_id: str) -> CheckpointFacts:
    return cat.checkpoints.get(hf_id) or CheckpointFacts(hf_id, None, None, "not in checkpoints.csv")


@dataclass(frozen=True)
class CheckpointSize:
    bytes: float
    exact: bool  # True: recorded safetensors bytes; False: the estimate with its margin
    how: str

    @property
    def gib(self) -> float:
        return self.bytes / GIB


def checkpoint_size(cat: Catalog, hf_id: str, model: ModelArch, fmt: PrecisionFormat) -> CheckpointSize:
    """Size of the whole checkpoint `hf_id` (the one a pool serves, stored in format `fmt`): the bytes
    recorded in checkpoints.csv, else `checkpoint_bytes` (safetensors metadata when cached, else the
    parameter estimate, to which `checkpoint_size_margin` is added: storage must not come up short)."""
    facts = checkpoint_facts(cat, hf_id)
    if facts.safetensors_bytes:
        return CheckpointSize(float(facts.safetensors_bytes), True, f"safetensors bytes ({CHECKPOINTS_FILE})")
    b, how = checkpoint_bytes(model, fmt.name, repo_id=hf_id, revision=facts.revision or "main", catalog=cat)
    if how.startswith(METADATA_SOURCE):
        return CheckpointSize(b, True, how)
    margin = number("checkpoint_size_margin", cat)
    return CheckpointSize(b * (1.0 + margin), False, f"{how}; + {margin:.0%} margin for storage")
