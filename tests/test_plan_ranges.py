"""The plan's GPU count and $/month ranges come from the model's held-out goodput error (issue 31
item 6): the pools re-sized at the p90 and the p10 of held-out measured ÷ predicted throughput
(perf_calibration.json goodput_range), said so in the output, beside the autoscaling range."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from sizing.catalog.lookup import load_catalog
from sizing.planning.planner import plan_stack
from sizing.report.plan_views import totals_rows
from sizing.stack import load_stack

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "stacks" / "Pulumi.dev.yaml"


def test_gpu_and_cost_ranges_follow_the_held_out_goodput_error() -> None:
    cat = load_catalog()
    lo, hi = cat.calibration.goodput_range
    assert lo < 1 < hi
    plan = plan_stack(load_stack(DEV), catalog=cat, goodput_scale=None)
    t, pool = plan.totals, plan.pools[0]
    fewest, most = t.gpus_range
    assert fewest <= t.gpus <= most and fewest < most  # dev's 100 users: the p10 needs more GPUs than planned
    # the pool re-sized on goodput x p10 / x p90: at least the output demand over that goodput
    g = pool.per_replica.goodput_output_tokens_per_s
    assert pool.replicas_range[1] >= math.ceil(t.demand_output_tokens_per_s / (g * lo) - 1e-9)
    assert pool.replicas_range[0] >= math.ceil(t.demand_output_tokens_per_s / (g * hi) - 1e-9)
    assert pool.replicas_range[0] <= pool.replicas <= pool.replicas_range[1]
    per_gpu = pool.tensor_parallel * pool.pipeline_parallel
    assert (fewest, most) == (pool.replicas_range[0] * per_gpu, pool.replicas_range[1] * per_gpu)  # one TP1 pool
    usd_lo, usd_hi = t.usd_per_month_range
    assert usd_lo <= t.usd_per_month <= usd_hi
    assert usd_hi == round(most / t.gpus * t.usd_per_month, 2)  # one GPU type: $ scales with GPUs
    text = dict(totals_rows(plan))
    assert "held-out goodput error" in text["GPUs / instances"] and f"{fewest:,}–{most:,}" in text["GPUs / instances"]
    assert "autoscaling" in text["GPU $/month (730 h)"]


def test_an_exact_model_has_no_range() -> None:
    from sizing.catalog.calibration import override_calibration
    from sizing.perf.load import clear_caches

    cat = load_catalog()
    override_calibration(dataclasses.replace(cat.calibration, goodput_range=(1.0, 1.0)))
    clear_caches()
    try:
        plan = plan_stack(load_stack(DEV), catalog=cat, goodput_scale=None)
    finally:
        override_calibration(None)
        clear_caches()
    assert plan.totals.gpus_range == [plan.totals.gpus, plan.totals.gpus]
    assert plan.totals.usd_per_month_range == [plan.totals.usd_per_month, plan.totals.usd_per_month]
