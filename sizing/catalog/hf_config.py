"""Model architectures from a Hugging Face `config.json` (a local file, or fetched from the hub).

Parameter counts, KV layout and layer kinds come from the family's reader (sizing/catalog/architectures/);
the catalog's rows keep the official model-card counts instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sizing.catalog.records import ModelArch
from sizing.errors import CatalogLookupError

CONFIG_MAX_BYTES = 4 * 2**20  # config.json files are kilobytes; Phi's rope tables make the largest ~10 KB


def model_from_config(c: Any, name: str, source: str, label: str | None = None) -> ModelArch:
    """A ModelArch from a parsed config.json, by its family's reader (sizing/catalog/architectures/);
    an unknown model_type, a missing field or an impossible value is one CatalogLookupError line
    that names the config as `label` (default `name`)."""
    from sizing.catalog.architectures import ArchitectureError, read_config

    try:
        return ModelArch(**read_config(c, name, source, label))
    except ArchitectureError as e:
        raise CatalogLookupError(str(e)) from None


def _reject_constant(token: str) -> float:
    raise ValueError(f"{token} is not a number a config may hold")


def read_config_file(path: Path) -> dict[str, Any]:
    """The parsed config.json at `path` (a directory means its config.json). Only a regular file
    is opened (never a FIFO or a device: it is opened non-blocking and checked before reading),
    at most CONFIG_MAX_BYTES, UTF-8 JSON whose top level is an object."""
    import os
    import stat

    if path.is_dir():
        path = path / "config.json"
    shown = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise CatalogLookupError(f"model config {shown}: no such file") from None
    except OSError as e:
        raise CatalogLookupError(f"model config {shown}: cannot open ({e.strerror or type(e).__name__})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CatalogLookupError(f"model config {shown}: not a regular file; give the path of a config.json")
        if st.st_size > CONFIG_MAX_BYTES:
            raise CatalogLookupError(f"model config {shown}: {st.st_size:,} bytes is more than a config.json holds "
                                     f"(limit {CONFIG_MAX_BYTES:,})")
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            raw = f.read(CONFIG_MAX_BYTES + 1)
    except OSError as e:
        raise CatalogLookupError(f"model config {shown}: cannot read ({e.strerror or type(e).__name__})") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(raw) > CONFIG_MAX_BYTES:
        raise CatalogLookupError(f"model config {shown}: more than {CONFIG_MAX_BYTES:,} bytes")
    try:
        c = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise CatalogLookupError(f"model config {shown}: not UTF-8 text (a binary file?)") from None
    except RecursionError:
        raise CatalogLookupError(f"model config {shown}: nested too deeply") from None
    except ValueError as e:  # JSONDecodeError is a ValueError
        raise CatalogLookupError(f"model config {shown}: not valid JSON ({str(e)[:80]})") from None
    if not isinstance(c, dict):
        raise CatalogLookupError(f"model config {shown}: must be a JSON object, not "
                                 f"{'null' if c is None else type(c).__name__}")
    return c


def model_from_config_file(path: Path) -> ModelArch:
    """The architecture of a local config.json (or a directory holding one)."""
    c = read_config_file(path)
    where = path / "config.json" if path.is_dir() else path
    named = c.get("_name_or_path")
    name = named if isinstance(named, str) and named.strip() and len(named) <= 200 else \
        (where.parent.name if where.name == "config.json" else where.stem)
    return model_from_config(c, name, f"config file {where}", label=str(where))


def _check_hub_reachable(timeout_s: float = 3.0) -> None:
    """Fail in seconds, not after the hub client's retries, when offline (or HF_HUB_OFFLINE=1)."""
    import os
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise ConnectionError("HF_HUB_OFFLINE is set")
    u = urlparse(hub_endpoint())
    # the endpoint's own port (a mirror on :8080), else the scheme's
    with socket.create_connection((u.hostname or "huggingface.co", u.port or (80 if u.scheme == "http" else 443)),
                                  timeout=timeout_s):
        pass


def hub_endpoint() -> str:
    """The hub huggingface_hub is configured with: $HF_ENDPOINT, else its own default (huggingface.co)."""
    import os

    env = os.environ.get("HF_ENDPOINT")
    if env:
        return env.rstrip("/")
    try:
        from huggingface_hub import constants

        return str(constants.ENDPOINT).rstrip("/")
    except ImportError:
        return "https://huggingface.co"


def model_from_hub(repo_id: str, known: list[str]) -> ModelArch:
    """Fetch `config.json` from the Hugging Face hub (needs network; gated models need HF_TOKEN)."""
    try:
        _check_hub_reachable()
        from huggingface_hub import hf_hub_download

        path = hf_hub_download(repo_id, "config.json", etag_timeout=5)
    except Exception as e:  # offline, gated, or missing: one clear line either way, naming what was tried
        raise CatalogLookupError(
            f"model {repo_id!r} is not in the catalog and its config.json could not be fetched from "
            f"{hub_endpoint()}/{repo_id} ({type(e).__name__}{': ' + str(e)[:120] if str(e) else ''}); use a "
            f"catalog name ({', '.join(known[:8])}, ... see `llmcap models`) or a path to a config.json") from None
    arch = model_from_config(read_config_file(Path(path)), repo_id, f"huggingface hub {repo_id}/config.json")
    from sizing.catalog.checkpoint_metadata import fetch_metadata

    fetch_metadata(repo_id)  # the hub is reachable now: cache the checkpoint's exact size (best effort)
    return arch
