"""Spot in plans (issue 17 item 2): `purchase: mixed` never costs more than on-demand-only, nor more
than the spot-only plan's type split at the same on-demand floor; a type without a spot price is
never priced as "spot at the on-demand rate"; every plan that buys spot states the price's date
and source, the interruption notice, and says so when every replica is on spot."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sizing.catalog.lookup import Catalog
from sizing.errors import NoFeasiblePlanError
from sizing.plan import Plan
from sizing.planning.planner import plan_stack
from sizing.stack import stack_from_config

CAT = Catalog()
GPUS = ["L4", "A10G", "L40S", "A100-80GB", "H100-SXM", "H200", "T4"]


def _plan(cfg: dict[str, Any], purchase: str, floor: float) -> Plan | None:
    c = {**cfg, "llmcap:hardware": {**cfg["llmcap:hardware"], "purchase": purchase, "spot_on_demand_floor": floor}}
    try:
        return plan_stack(stack_from_config("spot", c), CAT, goodput_scale=None)
    except NoFeasiblePlanError:
        return None


def _split_cost(pool: Any, region: str, floor: float) -> float | None:
    """What the spot-only plan's pool costs split at `floor` (on-demand part at on-demand prices)."""
    od = CAT.price(pool.instance_type, region, "on-demand")
    spot = CAT.price(pool.instance_type, region, "spot")
    if od is None or spot is None:
        return None
    r = pool.replicas
    od_r = min(r, max(1, math.ceil(r * floor)))

    def inst(n: int) -> int:
        return n * pool.pipeline_parallel if pool.pipeline_parallel > 1 else math.ceil(n / pool.replicas_per_instance)
    return inst(od_r) * od.usd_per_hour + inst(r - od_r) * spot.usd_per_hour


stacks = st.fixed_dictionaries({
    "model": st.sampled_from(["llama-3.1-8b-instruct", "qwen2.5-7b-instruct", "llama-3.1-70b-instruct",
                              "mistral-7b-instruct-v0.3"]),
    "users": st.sampled_from([1, 10, 120, 700, 2500]),
    "output": st.sampled_from([64, 256, 1024]),
    "itl": st.sampled_from([25, 40, 60, 100]),
    "gpus": st.lists(st.sampled_from(GPUS), min_size=1, max_size=4, unique=True) | st.none(),
    "floor": st.sampled_from([0.0, 0.25, 0.5, 1.0]),
    "redundancy": st.integers(0, 2),
})


@pytest.mark.slow  # 60 tuned plans (about 7 CPU s); tests/test_planner.py keeps a mixed-purchase plan in the fast run
@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(stacks)
def test_purchase_mixed_never_costs_more_than_its_parts(s: dict[str, Any]) -> None:
    hw: dict[str, Any] = {"redundancy": s["redundancy"]}
    if s["gpus"]:
        hw["gpus"] = s["gpus"]
    cfg = {"llmcap:workload": {"model": s["model"], "prompt_tokens": 512, "output_tokens": s["output"],
                               "traffic": {"concurrent_users": s["users"]},
                               "slo": {"ttft_p95_ms": 3000, "itl_p95_ms": s["itl"]}},
           "llmcap:hardware": hw}
    od = _plan(cfg, "on-demand", s["floor"])
    assume(od is not None)
    assert od is not None
    mixed = _plan(cfg, "mixed", s["floor"])
    assert mixed is not None
    assert mixed.totals.usd_per_hour <= od.totals.usd_per_hour + 1e-4  # totals are rounded to 4 places
    spot = _plan(cfg, "spot", s["floor"])
    if spot is not None:
        bound = _split_cost(spot.pools[0], "us-east-1", s["floor"])
        if bound is not None:
            assert mixed.totals.usd_per_hour <= bound + 1e-4, (mixed.pools, spot.pools)
    for p in mixed.pools:
        if p.purchase == "spot":  # a spot pool always has a real spot price below on-demand
            price = CAT.price(p.instance_type, "us-east-1", "spot")
            od_price = CAT.price(p.instance_type, "us-east-1", "on-demand")
            assert price is not None and od_price is not None
            assert p.usd_per_instance_hour == price.usd_per_hour < od_price.usd_per_hour


PROD = {"llmcap:workload": {"model": "meta-llama/Meta-Llama-3-8B-Instruct", "prompt_tokens": 1024,
                            "output_tokens": 512, "traffic": {"concurrent_users": 2000},
                            "slo": {"ttft_p95_ms": 1000, "itl_p95_ms": 40}},
        "llmcap:hardware": {"redundancy": 1}}


def test_a_type_without_spot_price_stays_on_demand_and_says_why() -> None:
    no_spot = sorted({t for (t, r, p) in CAT.prices if r == "us-east-1" and p == "on-demand"}
                     - {t for (t, r, p) in CAT.prices if r == "us-east-1" and p == "spot"})
    cfg = {**PROD, "llmcap:hardware": {"instance_types": [t for t in no_spot if t.startswith("g6e")][:3]}}
    mixed = _plan(cfg, "mixed", 0.5)
    od = _plan(cfg, "on-demand", 0.5)
    assert mixed is not None and od is not None
    assert {p.purchase for p in mixed.pools} == {"on-demand"}
    assert mixed.totals.usd_per_hour == pytest.approx(od.totals.usd_per_hour)
    assert any("on-demand (no spot price for" in w for w in mixed.warnings), mixed.warnings


def test_spot_plans_state_price_date_interruptions_and_spot_only() -> None:
    spot = _plan(PROD, "spot", 0.5)
    assert spot is not None
    text = "\n".join(spot.warnings)
    assert "an undated single sample" in text and "llmcap catalog refresh" in text
    assert "120 s interruption notice" in text
    assert "every replica is on spot" in text
    mixed = _plan(PROD, "mixed", 0.5)
    assert mixed is not None and {p.purchase for p in mixed.pools} == {"on-demand", "spot"}
    mtext = "\n".join(mixed.warnings)
    assert "interruption notice" in mtext and "every replica is on spot" not in mtext
    od = _plan(PROD, "on-demand", 0.5)
    assert od is not None and not any("spot" in w for w in od.warnings)
