"""Reading files a user names (stack files, saved plans, bench results): the text, or one
SpecError line that says which file and what to do."""

from __future__ import annotations

from pathlib import Path

from sizing.errors import SpecError


def read_user_file(path: str | Path, what: str, hint: str = "") -> str:
    """The UTF-8 text of `path`; a missing or unreadable file is one clear SpecError.
    `what` names the kind of file ("stack file"), `hint` says how to make one."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{p}: no such {what}" + (f"; {hint}" if hint else "")) from None
    except IsADirectoryError:
        raise SpecError(f"{p}: is a directory, not a {what}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{p}: cannot read ({e.__class__.__name__})") from None
