"""How big a model's checkpoint is, and where that figure comes from.

`checkpoint_bytes(model, precision)` is the one place other modules ask (storage sizing, the
deploy fit check, the plan's assumption line). In order of trust:

1. the checkpoint's own safetensors metadata (`huggingface_hub.HfApi.get_safetensors_metadata`:
   the header of every .safetensors file, read without downloading weights), cached per
   repo@revision under ~/.cache/llmcap/checkpoints/ (written atomically). The cache is read
   offline; the hub is asked only with `fetch=True` (`llmcap` does so when it fetches a model's
   config.json from the hub anyway) and never when HF_HUB_OFFLINE is set.
2. offline, the parameter count (model card or config-derived, see `ModelArch.params_source`)
   times the bytes per parameter of the checkpoint's precision. Known error: within ~2% of the
   published counts for every family in tests/data/configs (tests/test_architectures.py);
   multimodal checkpoints also hold a vision tower that is not counted.

Units: bytes (not GiB).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sizing.catalog import USER_CACHE_DIR, Catalog, ModelArch, load_catalog

CACHE_DIR = USER_CACHE_DIR.parent / "checkpoints"
METADATA_SOURCE = "safetensors metadata (huggingface_hub get_safetensors_metadata)"


@dataclass(frozen=True)
class CheckpointMetadata:
    """What the safetensors headers of one repo@revision say: parameters per dtype and the
    bytes of all tensor data."""

    repo_id: str
    revision: str
    parameter_count: dict[str, int]
    total_bytes: int
    files: int
    fetched_at: str

    @property
    def parameters(self) -> int:
        return sum(self.parameter_count.values())


def _is_hub_id(repo_id: str) -> bool:
    parts = repo_id.split("/")
    return len(parts) == 2 and all(parts) and not repo_id.startswith((".", "/", "~")) and \
        not repo_id.endswith(".json") and not Path(repo_id).exists()


def _cache_path(repo_id: str, revision: str) -> Path:
    safe = f"{repo_id.replace('/', '--')}@{revision}".replace(os.sep, "_")
    return CACHE_DIR / f"{safe}.json"


def cached_metadata(repo_id: str, revision: str = "main") -> CheckpointMetadata | None:
    """The cached metadata of repo@revision, or None (absent or unreadable: never an error)."""
    try:
        d = json.loads(_cache_path(repo_id, revision).read_text(encoding="utf-8"))
        meta = CheckpointMetadata(
            repo_id=str(d["repo_id"]), revision=str(d["revision"]),
            parameter_count={str(k): int(v) for k, v in d["parameter_count"].items()},
            total_bytes=int(d["total_bytes"]), files=int(d["files"]), fetched_at=str(d["fetched_at"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return meta if meta.total_bytes > 0 and meta.repo_id == repo_id else None


def _save(meta: CheckpointMetadata) -> None:
    """Write the cache entry atomically: a unique temporary file in the same folder, fsync,
    rename over the old entry. A reader sees the old entry or the new one, never half."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path = _cache_path(meta.repo_id, meta.revision)
    fd, tmp = tempfile.mkstemp(dir=CACHE_DIR, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({**meta.__dict__, "source": METADATA_SOURCE}, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _from_hub(repo_id: str, revision: str) -> CheckpointMetadata:
    from huggingface_hub import HfApi

    m: Any = HfApi().get_safetensors_metadata(repo_id, revision=revision, timeout=10)
    total = 0
    for fm in m.files_metadata.values():
        for t in fm.tensors.values():
            begin, end = t.data_offsets
            total += int(end) - int(begin)
    return CheckpointMetadata(repo_id=repo_id, revision=revision,
                              parameter_count={str(k): int(v) for k, v in m.parameter_count.items()},
                              total_bytes=total, files=len(m.files_metadata),
                              fetched_at=datetime.now(UTC).strftime("%Y-%m-%d"))


def fetch_metadata(repo_id: str, revision: str = "main") -> CheckpointMetadata | None:
    """Ask the hub for repo@revision's safetensors metadata and cache it; None when offline, the
    repo has no safetensors, or anything else goes wrong (the caller falls back to the count)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes") or not _is_hub_id(repo_id):
        return None
    try:
        meta = _from_hub(repo_id, revision)
    except Exception:  # offline, gated, not safetensors, a hub error: the derived count stands
        return None
    if meta.total_bytes <= 0:
        return None
    with contextlib.suppress(OSError):  # an unwritable cache costs a later lookup, not this answer
        _save(meta)
    return meta


def checkpoint_bytes(model: ModelArch, precision: str = "bf16", repo_id: str | None = None,
                     revision: str = "main", fetch: bool = False,
                     catalog: Catalog | None = None) -> tuple[float, str]:
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
    from sizing.memory import weight_bytes_per_replica

    cat = catalog or load_catalog()
    stored = precision
    if repo == model.hf_id and model.checkpoint_quant == "fp8" and precision in ("bf16", "fp16"):
        stored = "fp8"  # the published checkpoint is FP8 (its config's quantization_config)
    b = weight_bytes_per_replica(model, cat.precision(stored), include_mtp=True)
    how = "rounded as published" if model.params_source == "model card" else "within ~2% of published counts"
    return b, (f"{model.params_total_b + model.mtp_params_b:,.2f}B parameters from the {model.params_source} "
               f"({how}) at {stored}; offline estimate, no checkpoint metadata cached")


def model_size_line(model: ModelArch, precision: str = "bf16", catalog: Catalog | None = None) -> str:
    """The plan's assumption line: the model's size and which source it came from."""
    b, source = checkpoint_bytes(model, precision, catalog=catalog)
    return f"model size: {model.hf_id} checkpoint {b / 2**30:,.1f} GiB from {source}"
