"""Platform defaults (platform.csv, a Catalog table): system nodes, NAT gateways, image size and the
storage throughputs used for cold-start estimates. One place for each default.

`setting` / `number` read the given catalog's platform.csv (a `--catalog DIR` copy overrides it); the
planner passes its Catalog. A caller with no Catalog at hand (the Pulumi program's defaults, the
cold-start estimate of a saved plan) reads the bundled file through the same checked reader
(sizing.catalog.schema.bundled_table)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sizing.catalog.paths import BUNDLED_DIR
from sizing.catalog.records import platform_setting_from_row
from sizing.catalog.schema import bundled_table
from sizing.errors import CatalogDataError

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog


def platform_defaults(catalog: Catalog | None = None) -> dict[str, str]:
    """item -> value (text) of every platform.csv row."""
    if catalog is not None:
        return {k: v.value for k, v in catalog.platform.items()}
    return {r["item"]: platform_setting_from_row(r).value for r in bundled_table("platform.csv")}


def setting(name: str, catalog: Catalog | None = None) -> str:
    if catalog is not None:
        return catalog.setting(name)
    values = platform_defaults()
    if name not in values:
        raise CatalogDataError(f"{BUNDLED_DIR / 'platform.csv'}: no row {name!r}")
    return values[name]


def number(name: str, catalog: Catalog | None = None) -> float:
    if catalog is not None:
        return catalog.number(name)
    v = setting(name)
    try:
        return float(v)
    except ValueError:
        raise CatalogDataError(f"{BUNDLED_DIR / 'platform.csv'} row {name!r}: value {v!r} is not a number") from None
