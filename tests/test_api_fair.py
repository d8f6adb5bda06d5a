"""Fair comparisons with hosted APIs (issue 27, item 3): the API's figure per 1M output tokens is its bill
for the same traffic, input tokens included, as the self-hosted curve pays for prefill too. Before, the
compare sweep line and plot used the output price alone ($0.08 for dev's 8B model, where the input at
2 prompt tokens per output token makes it $0.18-0.41) and self-hosting looked 2-5× worse than it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from sizing.analysis.compare import summarize
from sizing.analysis.comparison import Option
from sizing.analysis.sweep import cheapest_api
from sizing.catalog.lookup import load_catalog
from sizing.cost.money import SECONDS_PER_MONTH
from sizing.planning.planner import plan_stack
from sizing.stack import load_stack

ROOT = Path(__file__).resolve().parents[1]
CAT = load_catalog()


def test_the_cheapest_api_is_priced_with_its_input_tokens() -> None:
    stack = load_stack(ROOT / "stacks" / "Pulumi.dev.yaml")  # 1024 prompt / 512 output tokens
    api = cheapest_api(CAT, stack)
    assert api is not None and api.prompt_tokens_per_output_token == pytest.approx(2.0)
    assert api.usd_per_million_output_tokens_with_input == pytest.approx(
        api.usd_per_million_output_tokens + 2.0 * api.usd_per_million_input_tokens)
    assert api.usd_per_million_output_tokens_with_input > api.usd_per_million_output_tokens


def test_compare_rows_and_sweep_lines_show_the_same_traffic_bill() -> None:
    stack = load_stack(ROOT / "stacks" / "Pulumi.dev.yaml")
    plan = plan_stack(stack, CAT, goodput_scale=None)
    row = summarize(Option("dev", stack, None), plan)
    out_mtok = plan.totals.demand_output_tokens_per_s * SECONDS_PER_MONTH / 1e6
    cheapest_bill = min(a.usd_per_month_same_traffic for a in plan.api_comparison)
    assert row.cheapest_api_usd_per_million_output_tokens == pytest.approx(cheapest_bill / out_mtok, rel=1e-3)
    assert row.cheapest_api_usd_per_million_output_tokens > min(a.usd_per_million_output_tokens
                                                                for a in plan.api_comparison)
