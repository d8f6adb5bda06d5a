"""The compare document is one versioned pydantic model (sizing.analysis.comparison.Comparison, with
its Sweep): the JSON the CLI writes reads back into it and writes out byte for byte,
absent parts stay absent, and a document whose top-level crossovers disagree with its sweep is rejected."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from sizing.analysis.comparison import SCHEMA_VERSION, Comparison, InfeasibleOption, OptionSummary, SweepPoint
from sizing.analysis.sweep import priced_point
from tests.compare_factory import option_row
from tests.golden_files import GOLDEN_DIR

GOLDEN = GOLDEN_DIR / "compare" / "l4_a100_users_sweep.json"


def test_golden_document_round_trips_through_the_model() -> None:
    text = GOLDEN.read_text()
    cmp = Comparison.model_validate(json.loads(text))
    assert cmp.schema_version == SCHEMA_VERSION and cmp.sweep is not None
    assert all(isinstance(o, OptionSummary) for o in cmp.options)
    assert json.dumps(cmp.model_dump(mode="json"), indent=2) + "\n" == text


def test_absent_parts_stay_absent() -> None:
    row = option_row("a", 100.0, 0.5, ["x"])
    bad = InfeasibleOption(label="b", stack="b", strategy="auto", problems=["p"], suggestions=[])
    doc = Comparison(options=[row, bad], winner="a", reason="r").model_dump(mode="json")
    assert list(doc) == ["schema_version", "options", "winner", "reason", "crossovers"]
    assert "same_as" not in doc["options"][0] and doc["options"][1]["feasible"] is False
    row.same_as = "z"
    assert Comparison(options=[row], winner="a", reason="r").model_dump(mode="json")["options"][0]["same_as"] == "z"


def test_top_level_crossovers_must_be_the_sweeps() -> None:
    cmp = Comparison.model_validate(json.loads(GOLDEN.read_text()))
    assert cmp.sweep is not None
    doc = cmp.model_dump(mode="json")
    doc["crossovers"] = []
    if cmp.sweep.crossovers:
        with pytest.raises(ValidationError, match="crossovers"):
            Comparison.model_validate(doc)
    doc = Comparison(options=cmp.options, winner=cmp.winner, reason=cmp.reason).model_dump(mode="json")
    doc["crossovers"] = json.loads(GOLDEN.read_text())["crossovers"] or [{"x": 1}]
    with pytest.raises(ValidationError):
        Comparison.model_validate(doc)


def test_a_point_keeps_its_unrounded_cost_for_crossovers() -> None:
    p = priced_point(10.0, 1.234567, 0.1234567, 4, "2× g6.12xlarge")
    assert (p.usd_per_hour, p.usd_per_month, p.usd_per_million_output_tokens) == (1.2346, 901.23, 0.1235)
    assert p.exact_usd_per_hour == 1.234567
    back = SweepPoint.model_validate(p.model_dump(mode="json"))
    assert back.exact_usd_per_hour == 1.2346  # read back from JSON: the rounded figure
    assert not priced_point(1.0, None).feasible


def test_the_views_depend_on_the_document_not_the_planner() -> None:
    import subprocess
    import sys

    code = "import sys, sizing.report.compare_views; print('sizing.planning.planner' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
