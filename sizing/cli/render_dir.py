"""The `llmcap render --out DIR` folder: rendered whole into a fresh folder and swapped in, so no
file of an earlier render survives beside the new one (a stale 405B LeaderWorkerSet next to dev's
manifests would be deployed by `kubectl apply -f`).

Each render leaves `DIR/.llmcap-render.json` (stack, target, the files it wrote). A folder is
replaced only when it is missing, empty, or an earlier render holding nothing but the files it
wrote; any other folder is refused with one line and left as it was. The swap is two renames in
the same parent folder (DIR -> a hidden old name, the new folder -> DIR), then the old one is
removed; a failed render removes its temporary folder and leaves DIR untouched.
Imports only the standard library and sizing.errors.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sizing.errors import SpecError

MARKER = ".llmcap-render.json"
MARKER_VERSION = 1


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir()}


def previous_render(out: Path) -> dict[str, Any] | None:
    """The marker of an earlier render in `out`, or None."""
    try:
        doc = json.loads((out / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("llmcap_render") != MARKER_VERSION \
            or not isinstance(doc.get("files"), list):
        return None
    return doc


def check_replaceable(out: Path) -> dict[str, Any] | None:
    """Raise SpecError unless `out` may be replaced; return the earlier render's marker, if any."""
    if out.exists() and not out.is_dir():
        raise SpecError(f"--out {out}: is a file, not a folder")
    cwd = Path.cwd().resolve()
    if out.exists() and (cwd == out.resolve() or out.resolve() in cwd.parents):
        raise SpecError(f"--out {out}: holds the current folder; render into a folder of its own")
    if not out.exists() or not any(out.iterdir()):
        return None
    marker = previous_render(out)
    if marker is None:
        raise SpecError(f"--out {out}: not empty and not an earlier llmcap render (no {MARKER}); "
                        "choose a new or empty folder")
    foreign = sorted(_files(out) - {str(f) for f in marker["files"]} - {MARKER})
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise SpecError(f"--out {out}: holds files the earlier render did not write ({shown}); "
                        "move them or choose another folder")
    return marker


def render_into(out: Path, stack: str, target: str, write: Callable[[Path], list[Path]]) -> tuple[list[Path], str]:
    """Run `write(folder)` into a fresh folder beside `out` and swap it in. Returns the files as
    paths under `out`, and a note naming what was replaced ("" when nothing was)."""
    marker = check_replaceable(out)
    parent = out.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.render-", dir=parent))
    umask = os.umask(0o022)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it 0700; a render folder gets the usual mode
    try:
        written = write(tmp)
        rel = sorted({p.relative_to(tmp).as_posix() for p in written})
        (tmp / MARKER).write_text(json.dumps({"llmcap_render": MARKER_VERSION, "stack": stack, "target": target,
                                              "files": rel}, indent=2) + "\n", encoding="utf-8")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=parent))
        os.rename(out, old / "d")
    try:
        os.rename(tmp, out)
    except BaseException:
        if old is not None:  # put the earlier render back
            os.rename(old / "d", out)
            shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    note = ""
    if marker is not None:
        note = f"replaced the earlier render of stack {marker.get('stack')} ({marker.get('target')}) in {out}"
    return [out / r for r in rel], note
