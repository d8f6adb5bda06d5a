"""The catalog the Pulumi program sees: the bundled one with a saved plan's region offerings, instance
specs and model (frozen by `llmcap plan --write`, sizing.planning.saved_plan.Pinned) in place of
whatever catalog cache the deploying machine has."""

from __future__ import annotations

from dataclasses import fields
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sizing.catalog.lookup import Catalog
from sizing.catalog.records import Instance, ModelArch

if TYPE_CHECKING:
    from sizing.planning.saved_plan import Pinned


class PinnedCatalog(Catalog):
    """The bundled catalog with the saved plan's region offerings and instance specs in place of
    whatever catalog cache this machine has: what the Pulumi program reads besides the plan."""

    def __init__(self, pinned: Pinned) -> None:
        super().__init__(directory=None)
        self.pinned = pinned

    @cached_property
    def _bundled_catalog(self) -> Catalog:
        """The bundled catalog, read once: each table below starts from it."""
        return Catalog(directory=None)

    @staticmethod
    def _records(cls: type[Any], rows: list[dict[str, Any]]) -> list[Any]:
        """The saved plan's rows as catalog records (JSON lists back to tuples; unknown keys dropped)."""
        names = {f.name for f in fields(cls)}
        return [cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in row.items() if k in names})
                for row in rows]

    @cached_property
    def offerings(self) -> dict[tuple[str, str], tuple[str, ...]]:
        base = {k: v for k, v in self._bundled_catalog.offerings.items() if k[1] != self.pinned.region}
        base.update({(t, self.pinned.region): tuple(azs) for t, azs in self.pinned.offerings.items()})
        return base

    @cached_property
    def instances(self) -> dict[str, Instance]:
        out = dict(self._bundled_catalog.instances)
        out.update({i.instance_type: i for i in self._records(Instance, self.pinned.instances)})
        return out

    @cached_property
    def models(self) -> dict[str, ModelArch]:
        """Bundled models, and the plan's own as it was read at --write (a config.json or Hub model too)."""
        out = dict(self._bundled_catalog.models)
        out.update({m.hf_id: m for m in self._records(ModelArch, self.pinned.models)})
        return out
