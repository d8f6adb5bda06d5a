"""Numbers for people: thousands separators, no more digits than the figure is worth, `$0.20` not
`$0.2`, "1 replica" not "1 replicas". Pure functions of plain numbers; imports nothing of sizing/."""

from __future__ import annotations

import math


def num(x: float) -> str:
    """3 significant figures at most below 100 (27.5, 3.33, 0.042), whole numbers with separators above."""
    if not math.isfinite(x):
        return "∞" if x > 0 else "-∞" if x < 0 else "n/a"
    a = abs(x)
    if a >= 100 or float(x).is_integer():
        return f"{x:,.0f}"
    digits = 1 if a >= 10 else 2 if a >= 1 else 3 if a >= 0.01 else 4
    return f"{x:,.{digits}f}".rstrip("0").rstrip(".")


def usd(x: float | None, cents: bool | None = None) -> str:
    """Dollars: whole dollars from $100 (unless `cents`), else two decimals ($0.20, $14.89); below one
    cent, three significant decimals ($0.0035)."""
    if x is None:
        return "not priced"
    a = abs(x)
    if cents is None:
        cents = a < 100
    if not cents:
        return f"${x:,.0f}"
    if 0 < a < 0.01:
        return f"${x:.4f}".rstrip("0")
    return f"${x:,.2f}" if round(a, 2) == round(a, 3) or a >= 1 else f"${x:,.3f}"


def plural(n: float, word: str, words: str | None = None) -> str:
    """`1 replica`, `2 replicas`, `1,000 users` (n as `num` writes it)."""
    return f"{num(n)} {word if n == 1 else (words or word + 's')}"
