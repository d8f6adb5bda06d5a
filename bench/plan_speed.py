"""Wall time of `llmcap plan stacks/Pulumi.dev.yaml`, Python start-up included (target < 1 s).

Run: python bench/plan_speed.py [--runs N] [STACK ...]
Prints the best and median wall time of N runs of the installed console script (or `llmcap`)
and the least CPU time (user + system) of a run.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("stacks", nargs="*", default=["stacks/Pulumi.dev.yaml", "stacks/Pulumi.prod.yaml",
                                                  "stacks/Pulumi.llama70b.yaml"])
    args = ap.parse_args()
    exe = shutil.which("llmcap")
    base = [exe] if exe else [sys.executable, "-c", "from sizing.cli import main; main()"]
    print(f"{'stack':34} {'best s':>8} {'median s':>9} {'CPU s':>7}  (runs={args.runs}, {' '.join(base)})")
    for stack in args.stacks:
        times, cpu = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(base + ["plan", stack, "--format", "json"], cwd=ROOT, check=True,
                           stdout=subprocess.DEVNULL)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            times.append(time.perf_counter() - t)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        # CPU s: user + system time of the run (on a shared, loaded machine the wall time exceeds it)
        print(f"{stack:34} {min(times):8.3f} {statistics.median(times):9.3f} {min(cpu):7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
