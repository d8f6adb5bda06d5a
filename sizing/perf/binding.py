"""What binds one replica: the constraint that stops its goodput from growing.

The goodput search (sizing.perf.goodput) raises the load on one replica until a target breaks or the
batch is full. This module says which one stopped it, in words a person can act on:

- `itl-tail`: one more request in flight would push a per-token or end-to-end target (ITL, TPOT, E2E, at
  the percentile the SLO names) past it;
- `ttft-queueing`: one more request (or a higher arrival rate) would push a TTFT target past it;
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
from sizing.spec import SLO_LABELS

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.perf.goodput import Targets

LABELS = {
    "itl-tail": "latency tail (ITL, TPOT or E2E)",
    "ttft-queueing": "TTFT queueing",
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


def binding(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape, gp: Goodput, targets: Targets,
            mode: str = "closed") -> Binding:
    """The constraint that binds one replica at its goodput point (see the module docstring). `targets`:
    the SLO's (metric, percentile, ms) targets (sizing.spec.Slo.targets()); only these are named."""
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
            held = " and ".join(f"{SLO_LABELS[m]} {q} is {_ms(at.percentile(m, q))} (target {v:,g})"
                                for m, q, v in targets)
            return Binding(code, f"{LABELS[code]}: {what} while {held}; decode steps bound by {regime}")
        nxt = estimate_closed_loop(catalog, cfg, shape, n + 1)
        load, more = f"{n} concurrent request{'s' if n != 1 else ''}", f"{n + 1}"
    else:
        nxt = estimate_open_loop(catalog, cfg, shape, at.requests_per_s * OPEN_LOOP_STEP)
        load, more = f"{at.requests_per_s:.2f} req/s", f"{at.requests_per_s * OPEN_LOOP_STEP:.2f} req/s"
    # the target one more step of load breaks first (by the largest factor over its value)
    m, q, v = max(targets, key=lambda t: nxt.percentile(t[0], t[1]) / t[2])
    code = "ttft-queueing" if m == "ttft" else "itl-tail"
    return Binding(code, f"{target_label(m, q)}: {SLO_LABELS[m]} {q} "
                         f"{_ms(at.percentile(m, q))} at {load}, {_ms(nxt.percentile(m, q))} at {more} "
                         f"(target {v:,g} ms); decode steps bound by {regime}")


def target_label(metric: str, q: str) -> str:
    """What binds when one target breaks first, named by the target: "ITL p99 tail", "TTFT p95 queueing"."""
    return f"{SLO_LABELS[metric]} {q} {'queueing' if metric == 'ttft' else 'tail'}"


def _ms(v: float) -> str:
    if v == float("inf"):
        return "unbounded (the queue grows)"
    return f"{v:,.0f} ms" if v >= 100 else f"{v:.1f} ms"


def _kv_capped(catalog: Catalog, cfg: ReplicaConfig, shape: WorkloadShape) -> bool:
    from sizing.perf.load import _ctx

    return _ctx(catalog, cfg, shape).max_running_reason == "kv-capacity"
