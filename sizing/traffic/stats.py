"""What a trace says before any plan: its size, rates, bursts, lengths, class mix and prefix reuse.

Units: seconds, requests/s, tokens. Percentiles by numpy's default (linear) method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sizing.traffic.reader import Trace

QUANTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class TraceStats:
    """`peak_requests_per_s_1s` / `_60s`: the most arrivals in any 1 s / 60 s window (sliding, starting at
    an arrival), per second. `prefix_reuse_share`: the share of all prompt tokens in prefix blocks an
    earlier request already had at the same leading position (an unbounded cache; 0 without prefix ids)."""

    source: str
    requests: int
    span_s: float
    mean_requests_per_s: float
    peak_requests_per_s_1s: float
    peak_requests_per_s_60s: float
    prefix_reuse_share: float
    prompt_tokens: dict[str, float]
    output_tokens: dict[str, float]
    class_mix: dict[str, float]

    def as_dict(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def peak_rate(arrival_s: np.ndarray, window_s: float) -> float:
    """The most arrivals in a window of `window_s` seconds starting at an arrival, per second."""
    if arrival_s.size == 0:
        return 0.0
    ends = np.searchsorted(arrival_s, arrival_s + window_s, side="left")
    return float((ends - np.arange(arrival_s.size)).max()) / window_s


def _pct(x: np.ndarray) -> dict[str, float]:
    ps = np.percentile(x, QUANTILES)
    out = {"mean": round(float(x.mean()), 1)}
    out.update({f"p{q}": round(float(v), 1) for q, v in zip(QUANTILES, ps, strict=True)})
    return out


def reused_prefix_tokens(trace: Trace) -> np.ndarray:
    """Per request, prompt tokens whose prefix block (same leading run of ids) appeared in an earlier
    request: an unbounded cache's hits, capped to the prompt."""
    out = np.zeros(trace.requests, dtype=np.int64)
    if trace.prefix_ids is None:
        return out
    # a trie of leading runs: node (parent, id); a node that exists before a request is a prefix seen earlier
    trie: dict[tuple[int, int], int] = {}
    b = trace.block_tokens
    for i, ids in enumerate(trace.prefix_ids):
        node, n, matching = -1, 0, True
        for x in ids:
            nxt = trie.get((node, x))
            if nxt is None:
                nxt = trie[(node, x)] = len(trie)
                matching = False
            elif matching:
                n += 1
            node = nxt
        out[i] = min(n * b, int(trace.prompt_tokens[i]))
    return out


def trace_stats(trace: Trace) -> TraceStats:
    a = trace.arrival_s
    span = float(a[-1] - a[0]) if a.size > 1 else 0.0
    reused = reused_prefix_tokens(trace)
    counts = np.bincount(trace.class_index, minlength=len(trace.class_names))
    return TraceStats(
        source=trace.source, requests=trace.requests, span_s=round(span, 3),
        mean_requests_per_s=round(trace.requests / span, 4) if span > 0 else float(trace.requests),
        peak_requests_per_s_1s=peak_rate(a, 1.0), peak_requests_per_s_60s=round(peak_rate(a, 60.0), 4),
        prefix_reuse_share=round(float(reused.sum()) / float(trace.prompt_tokens.sum()), 4),
        prompt_tokens=_pct(trace.prompt_tokens.astype(float)), output_tokens=_pct(trace.output_tokens.astype(float)),
        class_mix={n: round(float(c) / trace.requests, 4) for n, c in zip(trace.class_names, counts, strict=True)})
