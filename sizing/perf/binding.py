"""What binds one replica: the constraint that stops its goodput from growing.

The goodput search (sizing.perf.goodput) raises the load on one replica until a target breaks or the
batch is full. This module says which one stopped it, in words a person can act on:

- `itl-tail`: one more request in flight would push the ITL p95 past its target;
- `ttft-queueing`: one more request (or a higher arrival rate) would push the TTFT p95 past its target;
- `kv-capacity`: the KV cache holds no more sequences of this length (memory, not latency, binds);
- `engine-limit`: the engine's max_num_seqs caps the batch;
- `weights-do-not-fit`: the weights (plus overhead) exceed the GPU memory: no load at all;
- `itl-floor` / `ttft-floor`: even one request misses the target (a faster GPU, quantization or a looser
  SLO is needed; the step at batch 1 is the floor).

Each label comes with the decode step's regime at that load (memory-bandwidth, compute or
communication, from sizing.perf.load). Latencies in ms, per replica. Imports only sizing.perf.load*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.perf.load import Goodput, WorkloadShape, estimate_closed_loop, estimate_open_loop
from sizing.perf.replica import ReplicaConfig

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog

LABELS = {
    "itl-tail": "ITL p95 tail",
    "ttft-queueing": "TTFT p95 queueing",
    "kv-capacity": "KV-cache capacity",
    "engine-limit": "engine batch limit (max_num_seqs)",
    "weights-do-not-fit": "weights do not fit",
    "itl-floor": "ITL floor (one request already misses)",
    "ttft-floor": "TTFT floor (one request already misses)",
}
REGIMES = {"memory-bandwidth": "memory bandwidth", "compute": "compute", "communication": "tensor-parallel "
           "all-reduces", "kv-capacity": "memory bandwidth", "engine-limit": "memory bandwidth"}
# a goodput rate this much higher is "one step more load" in open loop (the bisection's tolerance is 0.1%)
OPEN_LOOP_STEP = 1.01


@dataclass(frozen=True)
class Binding:
    code: str  # one of LABELS
    text: str  # one line: what binds, at which load, and the step's regime

    @property
    def label(self) -> str:
        return LABELS[self.code]


def _code_of_failure(reason_code: str, reason: str) -> str:
    if reason_code == "does-not-fit":
        return "weights-do-not-fit"
    if reason_code == "misses-ttft":
        return "ttft-floor"
    return "itl-floor"


def binding(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape, gp: Goodput, ttft_p95_ms: float,
            itl_p95_ms: float, mode: str = "closed") -> Binding:
    """The constraint that binds one replica at its goodput point (see the module docstring)."""
    if not gp.feasible or gp.at is None:
        code = _code_of_failure(gp.reason_code, gp.reason)
        return Binding(code, f"{LABELS[code]}: {gp.reason.removeprefix('does not fit: ')}")
    at = gp.at
    regime = REGIMES.get(at.bound, at.bound)
    if mode == "closed":
        n = int(round(at.concurrency))
        if n >= at.max_concurrent_sequences:
            code = "kv-capacity" if at.bound != "engine-limit" and _kv_capped(catalog, cfg, shape) else "engine-limit"
            what = (f"the KV cache holds {at.max_concurrent_sequences} sequences of this length"
                    if code == "kv-capacity" else f"max_num_seqs {at.max_concurrent_sequences} caps the batch")
            return Binding(code, f"{LABELS[code]}: {what} while ITL p95 is {at.itl_p95_ms:.0f} ms "
                                 f"(target {itl_p95_ms:g}) and TTFT p95 {at.ttft_p95_ms:,.0f} ms "
                                 f"(target {ttft_p95_ms:,.0f}); decode steps bound by {regime}")
        nxt = estimate_closed_loop(catalog, cfg, shape, n + 1)
        load, more = f"{n} concurrent request{'s' if n != 1 else ''}", f"{n + 1}"
    else:
        nxt = estimate_open_loop(catalog, cfg, shape, at.requests_per_s * OPEN_LOOP_STEP)
        load, more = f"{at.requests_per_s:.2f} req/s", f"{at.requests_per_s * OPEN_LOOP_STEP:.2f} req/s"
    if nxt.itl_p95_ms > itl_p95_ms and (nxt.itl_p95_ms / itl_p95_ms >= nxt.ttft_p95_ms / ttft_p95_ms
                                       or nxt.ttft_p95_ms <= ttft_p95_ms):
        return Binding("itl-tail", f"{LABELS['itl-tail']}: ITL p95 {at.itl_p95_ms:.1f} ms at {load}, "
                                   f"{nxt.itl_p95_ms:.1f} ms at {more} (target {itl_p95_ms:g} ms); "
                                   f"decode steps bound by {regime}")
    return Binding("ttft-queueing", f"{LABELS['ttft-queueing']}: TTFT p95 {at.ttft_p95_ms:,.0f} ms at {load}, "
                                    f"{_ms(nxt.ttft_p95_ms)} at {more} (target {ttft_p95_ms:,.0f} ms); "
                                    f"decode steps bound by {regime}")


def _ms(v: float) -> str:
    return f"{v:,.0f} ms" if v != float("inf") else "unbounded (the queue grows)"


def _kv_capped(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape) -> bool:
    from sizing.perf.load import _ctx

    return _ctx(catalog, cfg, shape).max_running_reason == "kv-capacity"
