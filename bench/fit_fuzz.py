"""The deployability fuzz at scale: N generated valid stacks (default 500; varied models, GPUs,
precisions, regions, redundancy, multi-node) are planned, checked, and on a passing check recounted
independently (tests/fit_fuzz_support.py). Prints the counts as a table; exit 1 on any bug (a
traceback, or a passing check whose recount finds an unschedulable pod, a storage overflow, a model
mismatch or an inconsistent plan).

Run: python bench/fit_fuzz.py [--examples 500] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> int:
    from hypothesis import HealthCheck, given, seed, settings

    from sizing.catalog.lookup import load_catalog
    from tests.fit_fuzz_support import Outcome, evaluate, stack_configs, tally

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cat = load_catalog()
    outcomes: list[Outcome] = []
    bugs: list[tuple[Outcome, dict]] = []
    t0 = time.perf_counter()

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(stack_configs())
    def run(config: dict) -> None:
        try:
            out = evaluate(config, cat)
        except Exception as e:  # a traceback is a bug: count it, keep going
            out = Outcome("bug", detail=f"{type(e).__name__}: {e}")
        outcomes.append(out)
        if out.kind == "bug":
            bugs.append((out, config))

    random.seed(args.seed)
    run()
    elapsed = time.perf_counter() - t0
    table = tally(outcomes)
    width = max(len(k) for k in table)
    print(f"{'deployability fuzz':{width}}  count   ({len(outcomes)} stacks, {elapsed:.0f} s, seed {args.seed})")
    for k, v in table.items():
        print(f"{k:{width}}  {v:5d}")
    for out, config in bugs[:10]:
        print(f"BUG: {out.detail}\n  {config}")
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
