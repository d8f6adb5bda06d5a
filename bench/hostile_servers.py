"""The load generator against hostile loopback servers: what each server does, what the client made of
it (error kinds per request, or the one-line error of the preflight), seconds against each scenario's
target, and the peak of Python memory allocated meanwhile (tracemalloc). The same scenarios are asserted
by tests/test_bench_hostile.py (outcome and memory; the seconds there only against a hang guard).

    python bench/hostile_servers.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests/

from tests.hostile_suite import PEAK_MIB_MAX, REQUEST_TIMEOUT_S, SCENARIOS, run_scenario, table  # noqa: E402


def main() -> int:
    rows = [run_scenario(sc) for sc in SCENARIOS]
    print(f"request timeout {REQUEST_TIMEOUT_S:g} s; a row is ok when the expected outcome came under "
          f"{PEAK_MIB_MAX:g} MiB (tests/test_bench_hostile.py asserts it), in time when it came within its target "
          f"seconds (judged only here: wall time on a shared machine); load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print(table(rows))
    return 0 if all(r.ok and r.in_time for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
