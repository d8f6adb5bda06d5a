"""Shared pytest options. `--update-golden` (or LLMCAP_UPDATE_GOLDEN=1) rewrites golden files
under tests/golden/ instead of comparing against them."""

from __future__ import annotations

import os

import pytest

# Tests never reach the Hugging Face hub: a model that is not in the catalog fails fast offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files under tests/golden/ from the current output")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden")) or os.environ.get("LLMCAP_UPDATE_GOLDEN") == "1"
