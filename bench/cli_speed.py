"""Wall and CPU time of the `llmcap` commands whose speed the tests used to assert, Python start-up included.

The tests keep the behaviour (tests/test_validate_meaning.py, tests/test_stack_hardening.py,
tests/test_mix_bound.py); the figures are machine-dependent, so they are printed here, each against
its target:

- `llmcap validate STACK` for every bundled stack: target < 1 s
- `llmcap validate` and `llmcap plan` of a 20 MiB stack file (refused from its size, unread): < 2 s
- `llmcap plan` of a mixed-strategy 405B stack with 16k-token outputs at 10,000 requests/s (the bounded
  mix search; 22 s idle before the bound): < 10 s

Usage: python bench/cli_speed.py [--runs N]
Prints the best and median wall seconds of N runs, the least CPU seconds (user + system) of a run, the
exit code, the verdict against the target, and the machine's load average (wall time grows with it on a
shared machine; CPU time does not).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_mix_bound import BIG_405B  # noqa: E402


def timed(args: list[str], runs: int) -> tuple[float, float, float, int]:
    """Best and median wall seconds, least CPU seconds, and the exit code of `llmcap ARGS`."""
    walls, cpus, code = [], [], 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        code = subprocess.run([sys.executable, "-c", "from sizing.cli import main; main()", *args],
                              cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"}).returncode
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return min(walls), statistics.median(walls), min(cpus), code


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "Pulumi.big.yaml"
        pad = "# " + "x" * 98 + "\n"
        big.write_text((ROOT / "stacks" / "Pulumi.dev.yaml").read_text() + pad * (20 * 1024 * 1024 // len(pad)))
        mixed = Path(tmp) / "Pulumi.big405.yaml"
        mixed.write_text(yaml.safe_dump({"config": BIG_405B}))
        cases = [(f"validate {p.name}", ["validate", str(p.relative_to(ROOT))], 1.0)
                 for p in sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))]
        cases += [("validate 20 MiB stack file", ["validate", str(big)], 2.0),
                  ("plan 20 MiB stack file", ["plan", str(big)], 2.0),
                  ("plan 405B mixed, 16k outputs", ["plan", str(mixed), "--format", "json"], 10.0)]
        print(f"{'command':34} {'best s':>7} {'median s':>9} {'CPU s':>6} {'exit':>4}  target   (runs={a.runs})")
        slow = 0
        for name, args, target in cases:
            best, median, cpu, code = timed(args, a.runs)
            ok = best < target
            slow += not ok
            verdict = "OK" if ok else "TOO SLOW"
            print(f"{name:34} {best:7.3f} {median:9.3f} {cpu:6.3f} {code:>4}  < {target:g} s {verdict}")
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0 if slow == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
