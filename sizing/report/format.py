"""Formatting the views share: money, markdown tables, and console tables that fit the terminal."""

from __future__ import annotations

from typing import Any


def money(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "not priced"
    return f"${x:,.{digits}f}"


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    out = ["| " + " | ".join(esc(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def table_width(headers: list[str], rows: list[list[str]]) -> int:
    """Columns a rich Table (default box, padding 1) needs to show every cell on one line, uncut."""
    widths = [max([len(h)] + [len(r[i]) for r in rows if i < len(r)]) for i, h in enumerate(headers)]
    return sum(widths) + 3 * len(widths) + 1


def fitted_table(title: str, headers: list[str], rows: list[list[str]], width: int,
                 right: tuple[str, ...] = ()) -> Any:
    """A rich renderable of `rows` that fits `width` columns with no cell cut: the table when it fits
    (table_width), else one key: value block per row, headed by its first cell (as plan's pool view does
    below its wide layout). `right`: headers of right-aligned columns."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if table_width(headers, rows) <= width:
        t = Table(title=title)
        for h in headers:
            t.add_column(h, justify="right" if h in right else "left", no_wrap=True)
        for r in rows:
            t.add_row(*r)
        return t
    parts: list[Any] = [Text(title, style="bold")]
    for r in rows:
        g = Table.grid(padding=(0, 2))
        g.add_column(no_wrap=True, style="bold")
        g.add_column(overflow="fold")
        for h, v in zip(headers[1:], r[1:], strict=False):
            g.add_row(h, v)
        parts += [Text(f"{headers[0]}: {r[0]}", style="bold"), g]
    return Group(*parts)
