"""The layout check of every catalog data file against sizing/data/schema.yaml (hand-written: per table
its version, why llmcap reads it, and the kind of each column it reads).

`read_table(path, name)` returns the rows of one CSV file after checking its header and every row; the
first problem is a `CatalogDataError`, one line naming the file, the row (1 = the first row under the
header, with its line in the file) and the column, never a KeyError/ValueError from deep in the planner.
Imports only the standard library, yaml and sizing.errors / sizing.catalog.paths.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from sizing.catalog.paths import BUNDLED_DIR
from sizing.errors import CatalogDataError

SCHEMA_FILE = BUNDLED_DIR / "schema.yaml"
KINDS = ("key", "text", "number", "opt-number", "integer", "opt-integer", "flag")
FLAG_WORDS = ("yes", "no", "true", "false", "1", "0", "")
VERSION_COLUMN = "schema_version"


@dataclass(frozen=True)
class TableSchema:
    name: str
    version: int
    reason: str
    columns: dict[str, str]  # column -> kind (KINDS)


@lru_cache(maxsize=1)
def schemas() -> dict[str, TableSchema]:
    """Every table's schema, from sizing/data/schema.yaml (always the bundled one: it is the code's spec)."""
    import yaml

    doc = yaml.safe_load(SCHEMA_FILE.read_text(encoding="utf-8"))
    out = {}
    for name, t in doc["tables"].items():
        bad = sorted(set(t["columns"].values()) - set(KINDS))
        if bad:  # a typo in the spec itself is a bug of llmcap, not of the user's file
            raise ValueError(f"{SCHEMA_FILE}: {name} uses unknown column kinds {bad}")
        out[name] = TableSchema(name, int(t["version"]), str(t["reason"]), dict(t["columns"]))
    return out


@cache
def bundled_table(name: str) -> tuple[dict[str, str], ...]:
    """The checked rows of the bundled file `name` (sizing/data), for the few readers that are given no
    Catalog (the Pulumi program's defaults, estimates outside the planner); the planner passes its
    Catalog, whose `--catalog DIR` overrides these. Same reader, same checks."""
    return tuple(read_table(BUNDLED_DIR / name, name))


@lru_cache(maxsize=1)
def json_keys() -> dict[str, tuple[str, ...]]:
    """JSON data file -> the top-level keys llmcap reads (schema.yaml `json_files`)."""
    import yaml

    doc = yaml.safe_load(SCHEMA_FILE.read_text(encoding="utf-8"))
    return {name: tuple(t["keys"]) for name, t in (doc.get("json_files") or {}).items()}


def load_json(path: Path, name: str) -> dict[str, Any]:
    """A JSON data file `name` read from `path`, with the keys its schema names; one CatalogDataError line
    for a missing file, bad JSON or a missing key."""
    import json

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogDataError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CatalogDataError(f"{path}: not a JSON file ({e.__class__.__name__}: {e})") from None
    if not isinstance(doc, dict):
        raise CatalogDataError(f"{path}: expected a JSON object at the top")
    missing = [k for k in json_keys().get(name, ()) if k not in doc]
    if missing:
        raise CatalogDataError(f"{path}: no key {', '.join(missing)} (the layout of {name} is in "
                               "sizing/data/schema.yaml)")
    return doc


def _problem(value: str, kind: str) -> str | None:
    """Why `value` is not of `kind`, or None when it is."""
    v = value.strip()
    if kind == "text":
        return None
    if kind == "key":
        return None if v else "is empty"
    if kind == "flag":
        return None if v.lower() in FLAG_WORDS else f"{value!r} is not yes/no"
    if not v and kind.startswith("opt-"):
        return None
    try:
        x = float(v)
    except ValueError:
        x = math.nan
    if not math.isfinite(x):
        return f"{value!r} is not a number" if v else "is empty (a number is required)"
    if kind == "integer":
        try:
            int(v)
        except ValueError:
            return f"{value!r} is not a whole number"
    if kind == "opt-integer" and x != int(x):
        return f"{value!r} is not a whole number"
    return None


def read_table(path: Path, name: str) -> list[dict[str, str]]:
    """The rows of catalog file `name` read from `path`, checked against its schema."""
    schema = schemas().get(name)
    layout = f"the layout of {name} is in sizing/data/schema.yaml"
    bundled = path.parent.resolve() == BUNDLED_DIR.resolve()
    fix = f"fix the file ({layout})" if bundled else \
        f"fix it, or remove it from {path.parent} to read the bundled one ({layout})"
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rd = csv.DictReader(f)
            header = rd.fieldnames
            if not header:
                raise CatalogDataError(f"{path}: empty, no header row; {fix}")
            missing = [c for c in (schema.columns if schema else {}) if c not in header]
            if missing:
                raise CatalogDataError(f"{path}: no column {', '.join(missing)} in the header (version "
                                       f"{schema.version if schema else '?'} of {name} needs it); {fix}")
            rows = []
            for n, r in enumerate(rd, 1):
                where = f"{path} row {n} (line {rd.line_num})"
                if None in r:
                    raise CatalogDataError(f"{where}: {len(header) + len(r[None])} fields, the header has "
                                           f"{len(header)} (a comma in an unquoted field after {header[-1]}?); "
                                           f"{fix}")
                short = [c for c in header if r[c] is None]
                if short:
                    raise CatalogDataError(f"{where}: no value for {short[0]} (the row has "
                                           f"{len(header) - len(short)} fields, the header {len(header)}); {fix}")
                if schema is not None:
                    ver = (r.get(VERSION_COLUMN) or "").strip()
                    if ver and ver != str(schema.version):
                        raise CatalogDataError(f"{where}: {VERSION_COLUMN} {ver}, but this llmcap reads {name} "
                                               f"version {schema.version}; use a file written for it")
                    for col, kind in schema.columns.items():
                        why = _problem(r[col], kind)
                        if why:
                            raise CatalogDataError(f"{where}: {col} {why}; {fix}")
                rows.append(r)
            return rows
    except UnicodeDecodeError:
        raise CatalogDataError(f"{path}: not UTF-8 text; {fix}") from None
    except csv.Error as e:
        raise CatalogDataError(f"{path}: not a CSV file ({e}); {fix}") from None
    except OSError as e:
        raise CatalogDataError(f"{path}: cannot be read ({e.strerror or e.__class__.__name__})") from None
