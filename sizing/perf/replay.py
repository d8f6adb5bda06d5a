"""Replay recorded (or synthesized) requests over N replicas: route each request, keep each replica's
prefix cache, and run every replica's share through the step-level simulation (sizing.perf.sim).

Routing (the router in front of the replicas), decided in arrival order before the replicas run:
- `round-robin`: request i goes to replica i mod N.
- `least-loaded`: the replica with the fewest requests in flight, each counted from its arrival until
  its estimated finish (its prefill at the replica's prefill rate plus its output at one decode step
  per token, no queueing: the router's view of outstanding work, not the replica's real queue); ties
  rotate (request i tries replica i mod N first), so idle replicas share the arrivals and their caches
  fill alike (ties to the lowest index piled the caches, then the cache-affine traffic, on the first
  replicas: 2-3x the prefill work of the last ones on the Mooncake synthetic trace).
- `prefix-aware`: the replica whose prefix cache holds the longest leading run of the request's prefix
  blocks, unless that replica has PREFIX_BALANCE_SLACK more requests in flight than the least-loaded one
  (then least-loaded: a cache-aware router balances load first); ties go to the least-loaded.

Prefix cache per replica: LRU over the replica's KV blocks (vLLM's block size, platform.csv
`vllm_kv_block_size`, 16 tokens): a trace's prefix block of `block_tokens` (512 for Mooncake) covers
block_tokens / 16 of them, and the cache holds as many as the replica's KV cache has. A hit is the leading
run of the request's prefix blocks found in that replica's cache (whole blocks, at most prompt - 1 tokens
as vLLM's `get_computed_blocks`), and every block of the request is then most recently used.
The cache state follows arrival order (a request's blocks are cached when it is routed), which is early by
one prefill; running requests' own blocks are not counted against the cache (they are in the simulation).

Units: seconds inside, ms in the percentiles, tokens. Deterministic (no sampling here).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from sizing.catalog.platform import number
from sizing.perf.load import WorkloadShape, _ctx
from sizing.perf.memory import GIB
from sizing.perf.sim import Arrivals, GivenRequests, Lengths, simulate, weighted_quantiles

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.perf.replica import ReplicaConfig
    from sizing.traffic.reader import Trace

Routing = Literal["round-robin", "least-loaded", "prefix-aware"]
ROUTINGS: tuple[str, ...] = ("round-robin", "least-loaded", "prefix-aware")
# llmcap's model of a cache-aware router's load guard (a modelling choice, not an engine figure): a
# replica with this many more requests in flight than the least-loaded one loses its cache affinity
PREFIX_BALANCE_SLACK = 4
QUANTILES = ("p50", "p90", "p95", "p99")
METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")


@dataclass(frozen=True)
class ReplayResult:
    """One fleet's replay. `per_class[name][metric][q]`: ms, over the class's finished requests: TTFT, TPOT
    (each request's mean gap) and E2E per request, ITL over every inter-token gap of the class's requests.
    `prefix_hit_share`: prompt tokens served from the replicas' caches ÷ all prompt tokens. `finished_share`
    < 1 means the fleet did not keep up."""

    replicas: int
    routing: str
    per_class: dict[str, dict[str, dict[str, float]]]
    prefix_hit_share: float
    finished_share: float
    clipped_requests: int  # longer than the replica's context (max_model_len / KV cache) and cut
    preemptions: int
    stable: bool
    seconds: float = 0.0  # wall time of this replay
    notes: list[str] = field(default_factory=list)


def shape_of(trace: Trace) -> WorkloadShape:
    """The trace's lengths as the analytic model takes them (means and p95s, no guessed hit rate)."""
    p, o = trace.prompt_tokens, trace.output_tokens
    return WorkloadShape(float(p.mean()), float(o.mean()), float(np.percentile(p, 95)), float(np.percentile(o, 95)))


def _prefix_nodes(trace: Trace) -> list[list[int]] | None:
    """Each request's prefix as node ids of a trie: node k names the run of its first k + 1 blocks."""
    if trace.prefix_ids is None:
        return None
    trie: dict[tuple[int, int], int] = {}
    out = []
    for ids in trace.prefix_ids:
        node, chain = -1, []
        for b in ids:
            node = trie.setdefault((node, b), len(trie))
            chain.append(node)
        out.append(chain)
    return out


def route(trace: Trace, replicas: int, routing: str, service_s: np.ndarray, cache_blocks: int,
          blk: int) -> tuple[np.ndarray, np.ndarray]:
    """(replica of each request, prompt tokens it finds in that replica's prefix cache)."""
    n = trace.requests
    where = np.zeros(n, dtype=np.int64)
    hits = np.zeros(n, dtype=np.int64)
    nodes = _prefix_nodes(trace)
    per_block = max(trace.block_tokens // blk, 1)
    cap = max(cache_blocks // per_block, 1)  # trace blocks each replica's cache holds
    caches: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(replicas)]
    finish: list[list[float]] = [[] for _ in range(replicas)]
    load = [0] * replicas
    for i in range(n):
        t = float(trace.arrival_s[i])
        for r in range(replicas):
            h = finish[r]
            while h and h[0] <= t:
                heapq.heappop(h)
                load[r] -= 1
        chain = nodes[i] if nodes is not None else []
        if routing == "round-robin":
            r = i % replicas
        else:
            least = min(range(replicas), key=lambda x: (load[x], (x - i) % replicas))
            r = least
            if routing == "prefix-aware" and chain:
                best, best_hit = least, 0
                for x in range(replicas):
                    c = caches[x]
                    k = 0
                    while k < len(chain) and chain[k] in c:
                        k += 1
                    if k > best_hit or (k == best_hit and k > 0 and load[x] < load[best]):
                        best, best_hit = x, k
                if best_hit and load[best] - load[least] <= PREFIX_BALANCE_SLACK:
                    r = best
        c = caches[r]
        k = 0
        while k < len(chain) and chain[k] in c:
            k += 1
        hits[i] = min(k * trace.block_tokens, int(trace.prompt_tokens[i]) - 1)
        for node in chain:
            c[node] = None
            c.move_to_end(node)
        while len(c) > cap:
            c.popitem(last=False)
        where[i] = r
        heapq.heappush(finish[r], t + float(service_s[i]))
        load[r] += 1
    return where, np.maximum(hits, 0)


def replay(catalog: Catalog, cfg: ReplicaConfig, trace: Trace, replicas: int, routing: str | None = None,
           shape: WorkloadShape | None = None) -> ReplayResult:
    """Route `trace` over `replicas` replicas of `cfg` and simulate each. `routing` None: prefix-aware when
    the trace has prefix ids, else least-loaded. `shape`: the lengths the replicas are configured for
    (max_model_len from prompt p95 + output p95); default the trace's."""
    import time

    t0 = time.perf_counter()
    routing = routing or ("prefix-aware" if trace.prefix_ids is not None else "least-loaded")
    if routing not in ROUTINGS:
        raise ValueError(f"routing {routing!r} is not one of {', '.join(ROUTINGS)}")
    shape = shape or shape_of(trace)
    c = _ctx(catalog, cfg, shape)
    if not c.fit.fits:
        raise ValueError(f"the model does not fit: {c.fit.reason}")
    blk = int(number("vllm_kv_block_size", catalog))
    cache_blocks = int(c.fit.kv_cache_gib_available * GIB / c.fit.kv_cache_bytes_per_token) // blk
    prefill_s_per_token = c.sm.step_s(0.0, 0.0, 2048.0, 1024.0) / 2048.0
    decode_s = c.sm.step_s(1.0, c.mean_decode_context)
    service = trace.prompt_tokens * prefill_s_per_token + trace.output_tokens * decode_s
    where, hits = route(trace, replicas, routing, service, cache_blocks, blk)
    prompt_l = Lengths(shape.prompt_tokens, shape.prompt_tokens_p95)
    out_l = Lengths(shape.output_tokens, shape.output_tokens_p95)
    n = trace.requests
    first = np.full(n, np.nan)
    last = np.full(n, np.nan)
    send = trace.arrival_s.astype(float)
    P = trace.prompt_tokens.copy()
    OUT = trace.output_tokens.copy()
    H = np.zeros(n, dtype=np.int64)
    preemptions, stable = 0, True
    gaps: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (gap s, weight, global request) per replica
    for r in range(replicas):
        idx = np.flatnonzero(where == r)
        if idx.size == 0:
            continue
        res = simulate(catalog, cfg, prompt_l, out_l, Arrivals.burst(int(idx.size)),
                       requests=GivenRequests(send[idx], trace.prompt_tokens[idx], trace.output_tokens[idx], hits[idx]))
        pr = res.per_request
        assert pr is not None  # simulate returns them for given requests
        first[idx], last[idx] = pr["first_token_s"], pr["last_token_s"]
        P[idx], OUT[idx], H[idx] = pr["prompt_tokens"], pr["output_tokens"], pr["prefix_hit_tokens"]
        gaps.append((pr["gap_s"], pr["gap_weight"], idx[pr["gap_request"]]))
        preemptions += res.preemptions
        stable &= res.stable
    clipped = int(((trace.prompt_tokens > P) | (trace.output_tokens > OUT)).sum())
    done = np.isfinite(last)
    gv = np.concatenate([g[0] for g in gaps]) * 1e3 if gaps else np.zeros(0)
    gw = np.concatenate([g[1] for g in gaps]) if gaps else np.zeros(0, dtype=np.int64)
    gr = np.concatenate([g[2] for g in gaps]) if gaps else np.zeros(0, dtype=np.int64)
    per_class = {name: _class_stats(send, first, last, OUT, done & (trace.class_index == k), (gv, gw, gr))
                 for k, name in enumerate(trace.class_names)}
    notes = []
    if clipped:
        notes.append(f"{clipped:,} requests longer than a replica's context were cut to it")
    return ReplayResult(replicas=replicas, routing=routing, per_class=per_class,
                        prefix_hit_share=round(float(H.sum()) / float(max(trace.prompt_tokens.sum(), 1)), 4),
                        finished_share=round(float(done.mean()), 6), clipped_requests=clipped,
                        preemptions=preemptions, stable=stable and bool(done.all()),
                        seconds=round(time.perf_counter() - t0, 3), notes=notes)


def _class_stats(send: np.ndarray, first: np.ndarray, last: np.ndarray, out: np.ndarray, mask: np.ndarray,
                 gaps: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[str, dict[str, float]]:
    """One class's percentiles (ms) over the requests in `mask`. ITL is over tokens: every inter-token gap
    of those requests (`gaps`: ms, weight, request), as vLLM's benchmark_serving computes it
    (benchmarks/benchmark_serving.py calculate_metrics: `itls += outputs[i].itl` for each request, then
    `np.percentile(itls, p)`), so a prefill stall that holds a whole batch counts once per token it delays;
    TPOT is per request ((last - first) / (output - 1)), as there."""
    qs = np.array([50.0, 90.0, 95.0, 99.0])
    if not mask.any():
        return {m: {q: float("inf") for q in QUANTILES} for m in METRICS}
    ttft = (first[mask] - send[mask]) * 1e3
    e2e = (last[mask] - send[mask]) * 1e3
    o = out[mask]
    multi = o > 1
    tpot = (last[mask][multi] - first[mask][multi]) / (o[multi] - 1) * 1e3
    res = {"ttft_ms": np.percentile(ttft, qs), "e2e_ms": np.percentile(e2e, qs)}
    res["tpot_ms"] = np.percentile(tpot, qs) if tpot.size else np.zeros(4)
    gv, gw, gr = gaps
    mine = mask[gr] if gr.size else np.zeros(0, dtype=bool)
    if mine.any():
        w = weighted_quantiles(gv[mine], gw[mine])
        res["itl_ms"] = np.array([w[q] for q in QUANTILES])
    else:
        res["itl_ms"] = np.zeros(4)
    return {m: {q: round(float(v), 3) for q, v in zip(QUANTILES, res[m], strict=True)} for m in METRICS}
