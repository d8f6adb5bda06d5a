"""The AWS fault suite of `llmcap catalog refresh`, printed as a table: each injected fault, what
refresh did, and whether the cache directory is byte-identical afterwards.

Run: python bench/aws_faults.py   (needs the dev extra: moto, pytest; nothing reaches real AWS)
The same scenarios run in CI as tests/test_aws_faults.py.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    import pytest

    from tests.aws_faults import FAULTS, make_baseline, run_fault, table
    from tests.aws_support import set_dummy_aws_env

    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        tmp = Path(d)
        set_dummy_aws_env(mp, tmp, None)
        baseline = make_baseline(tmp / "base")
        outcomes = [run_fault(f, baseline, tmp / f"work{i}") for i, f in enumerate(FAULTS)]
    print(table(outcomes))
    bad = [o for o in outcomes if not o.ok]
    print(f"\n{len(outcomes)} faults, {len(bad)} not handled")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
