"""The generated-stack fuzz at a larger size than CI's: N stack files (valid, near-valid and hostile,
tests/stack_fuzz.py, 5% of them naming a hostile config.json, 5% a hostile workload.trace) through validate
and plan in process, every plan rendered (compose) and diffed against the previous one, a CliRunner sample,
and a subprocess sample whose peak RSS is measured per run. Prints the table (cases, tracebacks, hangs, max
RSS); exit 1 if anything failed.

Run: python bench/fuzz_stacks.py [--files 50000] [--seed 7] [--plan-every 2] [--subprocesses 20]
The default mix plans more (20% valid stacks, every second validated file planned) than CI's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # as the tests (tests/conftest.py): no hub lookups per case
    from tests.stack_fuzz import (
        BENCH_MIX,
        RSS_LIMIT_KIB,
        report,
        run_cases,
        run_cli_sample,
        run_subprocess,
        scratch_dir,
        subprocess_sample,
    )

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--plan-every", type=int, default=2)
    ap.add_argument("--cli", type=int, default=500, help="files through typer's CliRunner")
    ap.add_argument("--subprocesses", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as fallback, scratch_dir(Path(fallback)) as d:
        t = run_cases(d, args.seed, args.files, lambda i: print(f"  {i:,} files", file=sys.stderr),
                      mix=BENCH_MIX, plan_every=args.plan_every)
        run_cli_sample(d, args.seed + 1, args.cli, t)
        run_subprocess(d, subprocess_sample(args.seed + 2, args.subprocesses), t)
    print(report(t))
    bad = t.tracebacks or t.hangs or t.bad_errors or t.invariant_failures or t.subprocess_over_limit \
        or t.peak_rss_kib >= RSS_LIMIT_KIB
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
