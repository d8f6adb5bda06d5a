"""How long one step-level simulation takes (sizing/perf/sim.py; target < 100 ms per estimate).

Prints, per arrival process, the mean and worst wall time (and the mean CPU time) in ms over a set of configurations
(models × GPUs × precisions), the requests and scheduler iterations of the slowest run, and the
machine's load average (the times scale with it on a shared machine).

Usage: python bench/sim_speed.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sizing.catalog.lookup import load_catalog  # noqa: E402
from sizing.perf import sim as perf_sim  # noqa: E402
from sizing.perf.load import WorkloadShape, _ctx  # noqa: E402
from sizing.perf.replica import ReplicaConfig
from sizing.perf.sim import Arrivals, Lengths, simulate  # noqa: E402

CONFIGS = (("llama-3.1-8b-instruct", "L4", "fp8", 1), ("llama-3.1-8b-instruct", "H100-SXM", "fp8", 1),
           ("mixtral-8x7b-instruct", "H100-SXM", "bf16", 2), ("llama-3.1-70b-instruct", "A100-80GB", "bf16", 4),
           ("gpt-oss-120b", "H200", "mxfp4", 1))
ARRIVALS = (("closed loop, 1 user", Arrivals.closed(1)), ("closed loop, 32 users", Arrivals.closed(32)),
            ("closed loop, 128 users", Arrivals.closed(128)), ("Poisson, 4 req/s", Arrivals.poisson(4.0)),
            ("burst of 500 prompts", Arrivals.burst(500)))


def main() -> int:
    cat = load_catalog()
    prompt, output = Lengths(1024, 2048), Lengths(512, 1024)
    cfgs = [ReplicaConfig(cat.model(m), g, p, tp=tp) for m, g, p, tp in CONFIGS]
    for cfg in cfgs:  # build the per-config constants once (the planner has them already)
        _ctx(cat, cfg, WorkloadShape(prompt.mean, output.mean, prompt.p95, output.p95))
    print(f"{len(cfgs)} configurations, prompt 1024 (p95 2048) / output 512 (p95 1024) tokens, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'arrivals':26} {'mean ms':>8} {'worst ms':>9} {'mean CPU ms':>12} {'requests':>9} {'iterations':>11}")
    for name, arr in ARRIVALS:
        times, cpu, worst = [], [], (0.0, 0, 0)
        for cfg in cfgs:
            t, c = time.perf_counter(), time.process_time()
            r = simulate(cat, cfg, prompt, output, arr, seed=0)
            dt = (time.perf_counter() - t) * 1e3
            cpu.append((time.process_time() - c) * 1e3)
            times.append(dt)
            if dt >= worst[0]:
                worst = (dt, r.requests, perf_sim._LAST_ITERATIONS[0])
        print(f"{name:26} {statistics.mean(times):8.1f} {worst[0]:9.1f} {statistics.mean(cpu):12.1f} "
              f"{worst[1]:9d} {worst[2]:11d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
