"""Generated stack files through the CLI's command functions (issue 18, "Must show"): valid,
near-valid and hostile files (tests/stack_fuzz.py), >= 10,000 of them. Every file goes through
`validate`; one in ten of those that validate is planned too (a plan costs ~100x a refusal), and every
plan is rendered (docker compose target) and diffed against the previous plan (JSON and PR comment), all
in process; 5% name a hostile config.json as their model and 5% a hostile workload.trace (issue 27, item 9).
Reported as a table (-s): 0 tracebacks, 0 hangs over 30 s, 0 runs over 1 GiB RSS (the whole
in-process run's peak RSS bounds every run in it; a subprocess sample measures runs one by one),
every refusal one `error:` line per problem with exit 2 (3: infeasible), every plan consistent.

LLMCAP_FUZZ_FILES sets the count (default 10,000); `python bench/fuzz_stacks.py` runs more."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.stack_fuzz import (
    RSS_LIMIT_KIB,
    Tally,
    report,
    run_cases,
    run_cli_sample,
    run_subprocess,
    scratch_dir,
    subprocess_sample,
)

FILES = int(os.environ.get("LLMCAP_FUZZ_FILES", "10000"))
SEED = 20261201


@pytest.mark.slow
def test_generated_stack_files_never_traceback_hang_or_blow_up(tmp_path: Path) -> None:
    with scratch_dir(tmp_path / "fz") as d:
        t: Tally = run_cases(d, SEED, FILES, plan_every=10)
        run_cli_sample(d, SEED + 1, 40, t)
        run_subprocess(d, subprocess_sample(SEED + 2, 4), t)
    print("\n" + report(t))
    assert sum(t.cases.values()) >= FILES
    assert t.tracebacks == [] and t.hangs == [] and t.bad_errors == [] and t.invariant_failures == []
    # in process: no file may raise the high-water mark by 1 GiB (the process's own mark also holds every
    # test that ran before in the same pytest run); each subprocess run stays under 1 GiB on its own
    assert t.rss_growth_kib < RSS_LIMIT_KIB and t.subprocess_over_limit == []
    assert t.planned > 0 and t.subprocess_runs == 4 and t.cli_runs == 40
    assert t.rendered > 0 and t.diffed > 0 and t.cases["hostile-config"] > 0 and t.cases["hostile-trace"] > 0
