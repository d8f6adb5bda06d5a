"""Ties broken toward fewer risks, said in the output (issue 27, item 3). dev's 7 × g6e.xlarge cost $9,510
a month in fp8 and in int4-awq alike; the planner took the community 4-bit AWQ checkpoint (more goodput on
paper) silently. Now the same price and GPU count goes to fewer nodes, then the higher precision, and the
plan says which tie it decided and why."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sizing.catalog.lookup import load_catalog
from sizing.cli import app
from sizing.planning.planner import plan_stack
from sizing.stack import load_stack

DEV = Path(__file__).resolve().parents[1] / "stacks" / "Pulumi.dev.yaml"


def test_a_price_tie_goes_to_the_higher_precision_and_says_so() -> None:
    plan = plan_stack(load_stack(DEV), load_catalog(), goodput_scale=None)
    (pool,) = plan.pools
    assert (pool.instance_type, pool.precision) == ("g6e.xlarge", "fp8"), (pool.instance_type, pool.precision)
    ties = [a for a in plan.assumptions if a.startswith("tie: ")]
    assert ties and "int4-awq" in ties[0] and "higher precision" in ties[0], plan.assumptions
    out = CliRunner().invoke(app, ["plan", str(DEV)], env={"COLUMNS": "200"}).stdout
    assert "tie: g6e.xlarge fp8 TP1 and g6e.xlarge int4-awq TP1 cost the same" in out
