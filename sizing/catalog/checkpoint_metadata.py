"""A checkpoint's safetensors metadata from the Hugging Face hub, cached per repo@revision.

`huggingface_hub.HfApi.get_safetensors_metadata` reads the header of every .safetensors file
(parameters per dtype, each tensor's byte range) without downloading weights. Entries are cached
under ~/.cache/llmcap/checkpoints/ and written atomically; reading the cache never needs the
network, and the hub is never asked when HF_HUB_OFFLINE is set. `sizing.perf.checkpoint` turns this
into checkpoint bytes. Units: bytes, parameters.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sizing.catalog.paths import USER_CACHE_DIR
from sizing.user_files import atomic_write_text

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
    atomic_write_text(path, json.dumps({**meta.__dict__, "source": METADATA_SOURCE}, indent=1, sort_keys=True))


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
