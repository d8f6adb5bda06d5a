"""Reading files a user names (stack files, saved plans, bench results): the text, or one
SpecError line that says which file and what to do.

Only regular files are read (a FIFO would block, /dev/zero never ends), and at most `max_bytes`
(a 60 MB stack file took more than 30 s to parse: the limit is checked before anything is parsed)."""

from __future__ import annotations

import glob
import os
import stat
import tempfile
import time
from pathlib import Path

from sizing.errors import SpecError

MIB = 1024 * 1024
DEFAULT_MAX_BYTES = 64 * MIB  # saved plans and bench results; stack files pass a smaller limit


def read_user_file(path: str | Path, what: str, hint: str = "", max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The UTF-8 text of `path`; a missing, unreadable, non-regular or oversized file is one clear
    SpecError. `what` names the kind of file ("stack file"), `hint` says how to make one,
    `max_bytes` is the largest file read (bytes)."""
    p = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO for reading must not wait for a writer
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise SpecError(f"{p}: no such {what}" + (f"; {hint}" if hint else "")) from None
    except IsADirectoryError:
        raise SpecError(f"{p}: is a directory, not a {what}") from None
    except OSError as e:
        raise SpecError(f"{p}: cannot read ({e.__class__.__name__})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise SpecError(f"{p}: is a directory, not a {what}")
        if not stat.S_ISREG(st.st_mode):
            raise SpecError(f"{p}: not a regular file (a pipe or device); give the path of a {what}")
        if st.st_size > max_bytes:
            raise SpecError(f"{p}: {st.st_size / MIB:,.1f} MiB is too large for a {what} "
                            f"(the limit is {max_bytes / MIB:g} MiB)")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as f:
            fd = -1
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:  # grew while being read
            raise SpecError(f"{p}: larger than the {max_bytes / MIB:g} MiB limit for a {what}")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{p}: cannot read ({e.__class__.__name__})") from None
    finally:
        if fd >= 0:
            os.close(fd)


# a temporary file older than this is a killed writer's, not a running one's (a write takes milliseconds)
STALE_TEMP_S = 60.0


def remove_stale_temps(path: Path, now: float | None = None) -> list[Path]:
    """Remove `path`'s leftover temporary files (`.<name>.*.tmp`, atomic_write_text's names) last modified
    more than STALE_TEMP_S ago; a younger one may be another writer's and is kept. Returns those removed."""
    now = time.time() if now is None else now
    removed = []
    for p in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        try:
            if now - p.lstat().st_mtime > STALE_TEMP_S and stat.S_ISREG(p.lstat().st_mode):
                p.unlink()
                removed.append(p)
        except OSError:  # gone already (another writer cleaned it), or not ours to remove
            continue
    return removed


def atomic_write_text(path: Path, text: str, usual_mode: bool = False) -> None:
    """Write `path` so a reader sees the old file or the new one whole, never a part: a temporary
    file of its own (unique name) in the same directory, fsync, rename over, fsync the directory.
    `usual_mode`: the umask's mode (a file people commit), not mkstemp's 0600. Temporary files of `path`
    that a killed writer left (kill -9 between mkstemp and rename) are removed first (remove_stale_temps)."""
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if usual_mode:
            umask = os.umask(0o022)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
