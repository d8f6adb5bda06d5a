"""Times `llmcap compare` sweeps of 200 points (the target: under 5 s each on the dev machine).

Prints, per sweep: options, points, wall and CPU seconds (sweep including crossover refinement;
CPU time shows the cost when other jobs share the machine), and the crossovers found.
Usage: python bench/sweep_speed.py [--points 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sizing.analysis.comparison import Option  # noqa: E402
from sizing.analysis.sweep import parse_sweep, run_sweep  # noqa: E402
from sizing.catalog.lookup import load_catalog  # noqa: E402
from sizing.stack import load_stack  # noqa: E402

TARGET_S = 5.0
CASES = [
    ("L4 vs A100 stacks", ["scaleout-l4", "scaleup-a100"], None, "users=10..2000"),
    ("L4 vs A100 stacks", ["scaleout-l4", "scaleup-a100"], None, "users=10..5000"),  # tests/test_compare.py's
    ("L4 vs A100 stacks", ["scaleout-l4", "scaleup-a100"], None, "rate=0.5..100"),
    ("L4 vs A100 stacks", ["scaleout-l4", "scaleup-a100"], None, "itl_ms=10..60"),
    ("L4 vs A100 stacks", ["scaleout-l4", "scaleup-a100"], None, "prompt_tokens=128..4096"),
    ("dev: scale-up, scale-out, mixed", ["dev"], "scale-up,scale-out,mixed", "users=10..2000"),
    ("dev: scale-up, scale-out, mixed", ["dev"], "scale-up,scale-out,mixed", "itl_ms=10..60"),
]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=200)
    a = ap.parse_args(argv)
    cat = load_catalog()
    worst = 0.0
    print(f"{'case':34} {'sweep':24} {'points':>6} {'wall s':>7} {'cpu s':>6}  crossovers")
    for name, stacks, strategies, sweep in CASES:
        opts = []
        for s in stacks:
            st = load_stack(ROOT / "stacks" / f"Pulumi.{s}.yaml", [])
            if strategies:
                opts += [Option(x, st, x) for x in strategies.split(",")]
            else:
                opts.append(Option(st.name, st, st.hardware.strategy))
        spec = parse_sweep(f"{sweep}:{a.points}")
        t0, c0 = time.perf_counter(), time.process_time()
        sw = run_sweep(opts, spec, cat)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        worst = max(worst, dt)
        xs = ", ".join(f"{c.x:g}" for c in sw.crossovers) or "none"
        print(f"{name:34} {sweep:24} {len(spec.values):>6} {dt:>7.2f} {cpu:>6.2f}  {xs}")
    load = os.getloadavg()[0]
    print(f"\nslowest: {worst:.2f} s wall (target < {TARGET_S:g} s) -> {'OK' if worst < TARGET_S else 'TOO SLOW'}; "
          f"load average {load:.1f} on {os.cpu_count()} CPUs (other jobs inflate wall time; CPU s is this process)")
    return 0 if worst < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
