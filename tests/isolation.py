"""Test isolation from the machine's own llmcap state: the catalog cache (`llmcap catalog refresh`), the
calibration overlay (`llmcap calibrate`), cached checkpoint metadata and the Hugging Face hub."""

from __future__ import annotations

from pathlib import Path

import pytest


def no_local_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """As on a machine without `llmcap catalog refresh`, `llmcap calibrate` or cached checkpoint metadata."""
    import sizing.catalog.checkpoint_metadata
    import sizing.catalog.lookup

    monkeypatch.delenv("LLMCAP_CATALOG_DIR", raising=False)
    monkeypatch.setattr(sizing.catalog.lookup, "USER_CACHE_DIR", tmp_path / "no-cache")
    monkeypatch.setattr(sizing.catalog.lookup, "_DEFAULT", {})
    monkeypatch.setattr(sizing.catalog.checkpoint_metadata, "CACHE_DIR", tmp_path / "no-checkpoints")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LLMCAP_CALIBRATION_OVERLAY", str(tmp_path / "no-overlay.json"))
