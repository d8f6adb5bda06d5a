"""How long planning from a trace takes (issue 33: one replay of the Azure code trace < 5 s, a whole
trace plan < 60 s on this machine).

Prints the replay time of the Azure 2023 code trace (8,819 requests, tests/data/traces) for one fleet
(Llama-3.1-8B-Instruct, bf16, one L40S per replica, least-loaded routing, at 1, 4 and 8 replicas),
then the whole `plan_stack` time of that trace as a stack (with the fleet search's replays), and the
machine's load average (times scale with it on a shared machine).

Usage: python bench/trace_speed.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sizing.catalog.lookup import load_catalog  # noqa: E402
from sizing.perf.replay import replay  # noqa: E402
from sizing.perf.replica import ReplicaConfig  # noqa: E402
from sizing.planning.planner import plan_stack  # noqa: E402
from sizing.stack import stack_from_config  # noqa: E402
from sizing.traffic.reader import read_trace  # noqa: E402

TRACE = ROOT / "tests" / "data" / "traces" / "azure2023_code.csv"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def main() -> int:
    cat = load_catalog()
    t0 = time.perf_counter()
    trace = read_trace(TRACE)
    print(f"read {TRACE.name}: {trace.requests:,} requests in {time.perf_counter() - t0:.2f} s")
    cfg = ReplicaConfig(cat.model(MODEL), "L40S", "bf16", tp=1)
    for n in (1, 4, 8):
        c0 = time.process_time()
        r = replay(cat, cfg, trace, n, "least-loaded")
        cpu = time.process_time() - c0
        ttft = r.per_class["default"]["ttft_ms"]
        print(f"replay over {n} replica(s) of {MODEL} bf16 on L40S: {r.seconds:.2f} s wall, {cpu:.2f} s CPU "
              f"(TTFT p95 {ttft['p95']:,.0f} ms, p99 {ttft['p99']:,.0f} ms; target < 5 s)")
    stack = stack_from_config("azure-code", {
        "aws:region": "us-east-1",
        "llmcap:workload": {"model": MODEL, "precision": "bf16", "trace": str(TRACE),
                            "slo": {"ttft": {"p95": 2000}, "itl_p95_ms": 50}},
        "llmcap:hardware": {"gpus": ["L40S"], "redundancy": 0}}, "bench")
    t0, c0 = time.perf_counter(), time.process_time()
    plan = plan_stack(stack, cat, goodput_scale=None)
    total, cpu_total = time.perf_counter() - t0, time.process_time() - c0
    f = plan.fleet
    assert f is not None  # a trace stack's plan has its replayed fleet
    print(f"whole plan of the trace stack: {total:.1f} s wall, {cpu_total:.1f} s CPU ({f.replays} replays, "
          f"at most {total / max(f.replays, 1):.2f} s wall each; {f.replicas} replicas where the mean-based plan "
          f"had "
          f"{f.mean_based_replicas}; target < 60 s)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
