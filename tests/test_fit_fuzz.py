"""Generated valid stacks (varied models, GPUs, precisions, regions, redundancy, multi-node): the plan
is refused with a reason, or refused by the deployability check with one line per rule, or it passes
and an independent recount finds 0 unschedulable pods, 0 storage overflows, 0 model mismatches and a
consistent plan (issue 14 "Must show"; issue 18 item 7). bench/fit_fuzz.py runs 500 and prints the table."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from sizing.catalog.lookup import load_catalog
from sizing.cli import app
from tests.fit_fuzz_support import CONSISTENCY_RULES, MODEL_RULES, evaluate, stack_configs
from tests.k8s_support import ROOT

CAT = load_catalog()


@pytest.mark.slow
@settings(max_examples=100, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(stack_configs(any_gpu=False))
def test_generated_stacks_deploy_or_are_refused_with_a_reason(config: dict) -> None:
    out = evaluate(config, CAT)
    assert out.kind != "bug", f"{out.detail}\n{config}"
    # the planner never emits a plan whose flags or totals contradict it, nor one serving the wrong model
    assert not set(out.rules) & (CONSISTENCY_RULES | MODEL_RULES), f"{out.rules}: {out.detail}\n{config}"


def test_absurd_scale_is_a_clear_error_not_exit_0() -> None:
    r = CliRunner().invoke(app, ["plan", str(ROOT / "stacks" / "Pulumi.dev.yaml"), "--set",
                                 "workload.traffic.concurrent_users=10000000"])
    assert r.exit_code == 3, r.output
    assert "5,000 nodes" in r.output and "Traceback" not in r.output
