"""Formatting the plan, compare and diff views share: money and markdown tables."""

from __future__ import annotations


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
