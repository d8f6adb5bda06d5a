"""Checkpoint sizes: safetensors metadata from the hub (a fake HfApi here, never the real hub),
cached atomically; offline the parameter count stands and the plan says which source it used."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sizing.catalog import checkpoint_metadata as checkpoint
from sizing.catalog.checkpoint_metadata import cached_metadata, fetch_metadata
from sizing.catalog.lookup import Catalog, load_catalog
from sizing.perf.checkpoint import checkpoint_bytes, model_size_line


def _fake_metadata(tensors: dict[str, tuple[str, list[int], int]]) -> Any:
    """A stand-in for huggingface_hub's SafetensorsRepoMetadata: one file, tensors with data offsets."""
    infos, offset, counts = {}, 0, {}
    for name, (dtype, shape, nbytes) in tensors.items():
        infos[name] = SimpleNamespace(dtype=dtype, shape=shape, data_offsets=(offset, offset + nbytes))
        offset += nbytes
        n = 1
        for s in shape:
            n *= s
        counts[dtype] = counts.get(dtype, 0) + n
    return SimpleNamespace(files_metadata={"model.safetensors": SimpleNamespace(tensors=infos)},
                           parameter_count=counts)


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str | None]]:
    calls: list[tuple[str, str | None]] = []
    meta = _fake_metadata({"w": ("BF16", [1000, 1000], 2_000_000), "blocks": ("U8", [500, 16], 8000)})

    class FakeApi:
        def get_safetensors_metadata(self, repo_id: str, *, revision: str | None = None, **_: Any) -> Any:
            calls.append((repo_id, revision))
            return meta

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(checkpoint, "CACHE_DIR", tmp_path / "checkpoints")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return calls


def test_metadata_is_fetched_summed_and_cached(fake_hub: list[tuple[str, str | None]]) -> None:
    cat = Catalog()
    m = cat.model("llama-3.1-8b-instruct")
    before, source = checkpoint_bytes(m, "bf16", catalog=cat)
    assert "offline estimate" in source and before == pytest.approx(8.0e9 * 2, rel=0.01)
    b, source = checkpoint_bytes(m, "bf16", fetch=True, catalog=cat)
    assert b == 2_008_000 and "safetensors metadata" in source and fake_hub == [(m.hf_id, "main")]
    meta = cached_metadata(m.hf_id)
    assert meta is not None and meta.parameter_count == {"BF16": 1_000_000, "U8": 8000}
    # later lookups read the cache, without the hub
    assert checkpoint_bytes(m, "bf16", catalog=cat)[0] == 2_008_000 and len(fake_hub) == 1
    assert "safetensors metadata" in model_size_line(m, "bf16", cat)
    assert list(checkpoint.CACHE_DIR.glob("*.tmp")) == []


def test_offline_never_asks_the_hub(fake_hub: list[tuple[str, str | None]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert fetch_metadata("org/model") is None and fake_hub == []


def test_hub_errors_fall_back_to_the_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def get_safetensors_metadata(self, *a: Any, **k: Any) -> Any:
            raise OSError("no route to host")

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", Broken)
    monkeypatch.setattr(checkpoint, "CACHE_DIR", tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    m = Catalog().model("qwen3-8b")
    b, source = checkpoint_bytes(m, "bf16", fetch=True, catalog=load_catalog())
    assert "offline estimate" in source and b > 15e9


def test_corrupt_cache_is_ignored_and_writers_do_not_tear(fake_hub: list[tuple[str, str | None]]) -> None:
    checkpoint.CACHE_DIR.mkdir(parents=True)
    path = checkpoint._cache_path("org/model", "main")
    path.write_text("{not json")
    assert cached_metadata("org/model") is None
    seen: list[object] = []

    def reader() -> None:
        for _ in range(200):
            seen.append(cached_metadata("org/model"))

    writers = [threading.Thread(target=fetch_metadata, args=("org/model",)) for _ in range(6)]
    r = threading.Thread(target=reader)
    r.start()
    for w in writers:
        w.start()
    for w in writers + [r]:
        w.join()
    assert json.loads(path.read_text())["total_bytes"] == 2_008_000
    assert all(s is None or s.total_bytes == 2_008_000 for s in seen)  # never half an entry


def test_gpt_oss_checkpoint_offline_counts_mxfp4_experts() -> None:
    cat = Catalog()
    b, _ = checkpoint_bytes(cat.model("gpt-oss-120b"), "bf16", catalog=cat)
    assert 58 * 2**30 < b < 66 * 2**30  # published checkpoint ~65 GB
