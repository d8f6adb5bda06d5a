"""Where catalog data lives: the bundled files (sizing/data) and the user cache that `llmcap catalog
refresh` writes (~/.cache/llmcap/catalog, or under $XDG_CACHE_HOME)."""

from __future__ import annotations

import os
from pathlib import Path

BUNDLED_DIR = Path(__file__).parent.parent / "data"
USER_CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "llmcap" / "catalog"
CATALOG_FILES = ("gpus.csv", "instances.csv", "prices.csv", "offerings.csv", "models.csv",
                 "api_prices.csv", "platform_prices.csv", "precisions.csv", "engines.csv")
