"""The sweep plot of `llmcap compare --sweep ... --plot FILE.png` (matplotlib, Agg backend).

Imported only when a plot is asked for: matplotlib must stay out of every other import path.
Top panel: GPU $/month per option as step curves (GPUs come in whole units), crossovers marked and
labelled, and the swept range where an option has no plan meeting the SLO shaded in its colour.
Bottom panel: $ per 1M output tokens at planned load, with the cheapest hosted API as a line (its bill for the
same traffic, input tokens included, per 1M output tokens).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

if TYPE_CHECKING:
    from sizing.analysis.comparison import Sweep

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def _spans(xs: list[float], ok: list[bool]) -> list[tuple[float, float]]:
    """x ranges (between neighbouring swept values) where ok is False."""
    out: list[tuple[float, float]] = []
    for i, good in enumerate(ok):
        if good:
            continue
        lo = xs[i] if i == 0 else (xs[i - 1] + xs[i]) / 2
        hi = xs[i] if i == len(xs) - 1 else (xs[i] + xs[i + 1]) / 2
        if out and abs(out[-1][1] - lo) < 1e-12:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def _log_useful(values: list[float]) -> bool:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    return bool(vals) and max(vals) / min(vals) > 20


def plot_sweep(sw: Sweep, path: Path, title: str = "") -> Path:
    """Write the two-panel sweep figure of a comparison's sweep; returns the path."""
    fig, _labels = build_figure(sw, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def sweep_svg(sw: Sweep, title: str = "") -> str:
    """The same figure as SVG text, for inlining in a self-contained HTML document (no date in its
    metadata, so the same sweep gives the same bytes)."""
    import io

    with matplotlib.rc_context({"svg.hashsalt": "llmcap"}):  # stable element ids
        fig, _labels = build_figure(sw, title)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buf.getvalue()


def _money_formatter(cents: bool) -> Any:
    from matplotlib.ticker import FuncFormatter

    def fmt(v: float, _pos: int) -> str:
        if v <= 0 or not math.isfinite(v):
            return "$0" if v == 0 else ""
        if cents and v < 100:
            return f"${v:,.2f}" if v >= 0.1 else f"${v:.3g}"
        if v >= 1e6:
            return f"${v / 1e6:,.3g}M"
        return f"${v:,.0f}"
    return FuncFormatter(fmt)


def _plain_formatter(unit: str) -> Any:
    from matplotlib.ticker import FuncFormatter

    def fmt(v: float, _pos: int) -> str:
        if not math.isfinite(v):
            return ""
        text = f"{v:,.0f}" if abs(v) >= 10 or float(v).is_integer() else f"{v:.2g}"
        return f"{text} {unit}".rstrip()
    return FuncFormatter(fmt)


def _plain_ticks(ax: Any, axis: str, formatter: Any, log: bool) -> None:
    """Plain tick labels (no 10^k, no offset): a formatter on the major ticks, 1-2-5 steps on log axes."""
    from matplotlib.ticker import LogLocator, NullFormatter

    a = ax.xaxis if axis == "x" else ax.yaxis
    if log:
        a.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        a.set_minor_formatter(NullFormatter())
    a.set_major_formatter(formatter)


def _overlaps(a: Any, b: Any) -> bool:
    return bool(a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1)


def _place_without_overlap(fig: Any, ax: Any, labels: list[Any]) -> None:
    """Move each crossover label down (in axes fraction) until it overlaps no label placed before it."""
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    axes_height = ax.get_window_extent(renderer).height

    def box(lab: Any) -> Any:  # the label's text (with its rounded box's padding), not its arrow
        return Text.get_window_extent(lab, renderer).padded(6)

    placed: list[Any] = []
    for lab in labels:
        for _ in range(40):
            b = box(lab)
            clash = [p for p in placed if _overlaps(b, p)]
            if not clash:
                break
            x, y = lab.get_position()
            lab.set_position((x, y - (b.y1 - min(p.y0 for p in clash)) / axes_height - 0.01))
        placed.append(box(lab))


def build_figure(sw: Sweep, title: str = "") -> tuple[Any, list[Any]]:
    """The figure and its crossover labels (placed so that none overlaps another)."""
    xs: list[float] = sw.values
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 8.5), dpi=110, sharex=True,
                                   gridspec_kw={"height_ratios": [3, 2]})
    all_month: list[float] = []
    all_per_m: list[float] = []
    for i, (name, pts) in enumerate(sw.series.items()):
        color = COLORS[i % len(COLORS)]
        month = [p.usd_per_month if p.usd_per_month is not None else math.nan for p in pts]
        per_m = [p.usd_per_million_output_tokens if p.usd_per_million_output_tokens is not None
                 else math.nan for p in pts]
        all_month += [v for v in month if not math.isnan(v)]
        all_per_m += [v for v in per_m if not math.isnan(v)]
        ax1.step(xs, month, where="post", color=color, lw=2, label=name)
        ax2.step(xs, per_m, where="post", color=color, lw=2, label=name)
        for k, (lo, hi) in enumerate(_spans(xs, [p.usd_per_month is not None for p in pts])):
            for ax in (ax1, ax2):
                ax.axvspan(lo, hi, color=color, alpha=0.12, lw=0,
                           label=f"{name}: no plan meets the SLO" if ax is ax1 and k == 0 else None)
    n_cross = len(sw.crossovers)
    size = 10 if n_cross <= 5 else 8
    labels: list[Any] = []
    for j, c in enumerate(sw.crossovers):
        x = c.x
        y = max(c.usd_per_month_at_x.values())
        for ax in (ax1, ax2):
            ax.axvline(x, color="black", ls=":", lw=1.2)
        ax1.plot([x], [y], marker="o", color="black", ms=7, zorder=5)
        # labels stacked down the upper part of the panel so close crossovers do not overlap
        labels.append(ax1.annotate(
                     f"crossover {j + 1}: {x:,.4g} {_short(sw.variable)}\n{c.cheaper_after} cheaper above",
                     xy=(x, y), xytext=(x, 0.93), textcoords=("data", "axes fraction"),
                     fontsize=size, ha="left" if _frac(xs, x, sw.log_spaced) < 0.7 else "right", va="top",
                     arrowprops={"arrowstyle": "->", "color": "black", "shrinkB": 4},
                     bbox={"boxstyle": "round", "fc": "white", "ec": "0.5", "alpha": 0.9}))
    for e in sw.feasibility_edges:
        ax1.axvline(e.x, color="0.35", ls="--", lw=1)
        ax1.annotate(f"{e.option}: SLO met only {'≥' if e.feasible == 'above' else '≤'} {e.x:.4g}",
                     xy=(e.x, 0.04), xycoords=("data", "axes fraction"), xytext=(5, 4),
                     textcoords="offset points", fontsize=9, va="bottom", color="0.2")
    api = sw.cheapest_api
    if api:
        price = api.usd_per_million_output_tokens_with_input  # input tokens billed too, as the GPU curve pays prefill
        ax2.axhline(price, color="0.3", ls="--", lw=1.5,
                    label=f"cheapest hosted API: {api.provider} {api.model} (${price:g}/1M out, input included"
                          + (f"; cached input at ${api.usd_per_million_cached_input_tokens:g}/1M"
                             if api.cached_input_share > 0 and api.usd_per_million_cached_input_tokens is not None
                             else "") + ")")
        all_per_m.append(price)
    if sw.log_spaced:
        ax1.set_xscale("log")
    if _log_useful(all_month):
        ax1.set_yscale("log")
    if _log_useful(all_per_m):
        ax2.set_yscale("log")
    _plain_ticks(ax1, "y", _money_formatter(cents=False), _log_useful(all_month))
    _plain_ticks(ax2, "y", _money_formatter(cents=True), _log_useful(all_per_m))
    _plain_ticks(ax2, "x", _plain_formatter(""), sw.log_spaced)
    ax1.set_ylabel("GPU $/month (730 h)")
    ax2.set_ylabel("$ per 1M output tokens\n(GPU, planned load)")
    ax2.set_xlabel(sw.label)
    ax1.set_title(title or f"Monthly cost vs {sw.label}")
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="best", fontsize=9)
    fig.tight_layout()
    _place_without_overlap(fig, ax1, labels)
    return fig, labels


def _frac(xs: list[float], x: float, log: bool) -> float:
    """Where x lies across the swept range, 0..1 (on the plot's scale)."""
    lo, hi = xs[0], xs[-1]
    if log and lo > 0:
        return math.log(x / lo) / math.log(hi / lo) if hi > lo else 0.0
    return (x - lo) / (hi - lo) if hi > lo else 0.0


def _short(var: str) -> str:
    return {"users": "users", "rate": "req/s", "prompt_tokens": "prompt tokens", "itl_ms": "ms ITL"}.get(var, var)
