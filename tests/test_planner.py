"""The planner: worked examples, optimality against brute force, and monotone properties."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sizing.catalog.lookup import load_catalog
from sizing.cli import app
from sizing.errors import NoFeasiblePlanError
from sizing.perf.goodput import goodput
from sizing.perf.load import WorkloadShape
from sizing.perf.memory import memory_fit
from sizing.perf.replica import ReplicaConfig
from sizing.plan import SCHEMA_VERSION, Plan
from sizing.planning.candidates import size_replicas
from sizing.planning.planner import plan_stack
from sizing.stack import Stack, load_stack

ROOT = Path(__file__).resolve().parents[1]
CAT = load_catalog()
runner = CliRunner()


def stack(name: str = "dev", *sets: str) -> Stack:
    return load_stack(ROOT / "stacks" / f"Pulumi.{name}.yaml", list(sets))


def plan(name: str = "dev", *sets: str) -> Plan:
    return plan_stack(stack(name, *sets), CAT, goodput_scale=None)


def test_worked_replica_example() -> None:
    # 20 req/s × 400 output tokens ÷ 2,500 tokens/s per 4-GPU replica = 3.2 → 4, + 1 = 5 replicas = 20 GPUs
    need, total = size_replicas(20 * 400, 2500, 1)
    assert (need, total) == (4, 5)
    assert total * 4 == 20


def test_spares_are_whole_nodes_when_nodes_hold_several_replicas() -> None:
    p = plan("scaleup-a100", "workload.precision=fp16", "hardware.redundancy=1")
    pool = p.pools[0]
    if pool.replicas_per_instance > 1:
        lost = pool.replicas_per_instance  # one node's replicas
        assert pool.replicas - lost >= pool.replicas_for_demand
        assert pool.replicas == pool.instances_desired * pool.replicas_per_instance


def test_concurrent_users_bound_replicas_by_slo_concurrency() -> None:
    # 100 active users, replica meets the SLO up to 30 in flight: 4 replicas even if tokens say 2
    need, total = size_replicas(100 * 40, 2500, 1, concurrent_users=100, goodput_concurrency_per_replica=30)
    assert (need, total) == (4, 5)


@pytest.mark.parametrize("name", ["dev", "prod", "scaleout-l4", "scaleup-a100", "llama70b"])
def test_bundled_stacks_plan_consistently(name: str) -> None:
    p = plan(name)
    t = p.totals
    assert p.pools and t.gpus > 0 and t.usd_per_hour > 0
    assert math.isclose(t.usd_per_month, t.usd_per_hour * 730, rel_tol=1e-3)
    assert t.usd_per_month_min <= t.usd_per_month <= t.usd_per_month_max
    w = p.workload
    for pool in p.pools:
        r = pool.per_replica
        assert r.ttft_p95_ms <= w.slo.ttft_p95_ms + 1e-6, pool.name
        assert r.itl_p95_ms <= w.slo.itl_p95_ms + 1e-6, pool.name
        assert pool.replicas == pool.replicas_for_demand + pool.redundancy_replicas
        assert pool.instances_min <= pool.instances_desired <= pool.instances_max
        assert pool.vllm.tensor_parallel_size == pool.tensor_parallel
    # $/1M tokens = $/h ÷ (tokens/s × 3600) × 1e6
    assert math.isclose(t.usd_per_million_output_tokens,
                        t.usd_per_hour / (t.demand_output_tokens_per_s * 3600) * 1e6, rel_tol=1e-3)
    assert Plan.from_json(p.to_json()) == p
    assert p.api_comparison, "a hosted-API comparison is expected for these models"


def test_fp16_on_one_l4_cannot_meet_25ms() -> None:
    with pytest.raises(NoFeasiblePlanError) as e:
        plan("scaleout-l4", "workload.precision=fp16", "hardware.instance_types=[g6.xlarge, g6.2xlarge]")
    text = " ".join(e.value.problems)
    assert "L4" in text and "misses-itl" in text
    assert e.value.suggestions, "an infeasible plan must say what would make it feasible"


def test_infeasible_cli_exit_3_with_reasons() -> None:
    r = runner.invoke(app, ["plan", str(ROOT / "stacks" / "Pulumi.scaleout-l4.yaml"),
                            "--set", "workload.precision=fp16", "--set", "hardware.instance_types=[g6.xlarge]"])
    assert r.exit_code == 3, r.output
    assert "Traceback" not in r.output
    assert "to make it feasible:" in r.output


def test_plan_cli_json_fields() -> None:
    r = runner.invoke(app, ["plan", str(ROOT / "stacks" / "Pulumi.dev.yaml"), "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["schema_version"] == SCHEMA_VERSION
    for k in ("instance_type", "gpu", "gpus_per_instance", "tensor_parallel", "pipeline_parallel", "replicas",
              "replicas_per_instance", "instances_min", "instances_desired", "instances_max", "vllm"):
        assert k in d["pools"][0]
    for k in ("gpus", "instances", "usd_per_hour", "usd_per_month", "usd_per_million_output_tokens",
              "usd_per_million_output_tokens_at_capacity"):
        assert k in d["totals"]
    for k in ("provider", "model", "usd_per_million_input_tokens", "usd_per_million_output_tokens",
              "usd_per_month_same_traffic", "ratio_to_self_hosted"):
        assert k in d["api_comparison"][0]
    for k in ("alternatives", "warnings", "assumptions"):
        assert isinstance(d[k], list)


def test_markdown_and_table_render() -> None:
    for fmt in ("table", "markdown"):
        r = runner.invoke(app, ["plan", str(ROOT / "stacks" / "Pulumi.dev.yaml"), "--format", fmt],
                          env={"COLUMNS": "160"})
        assert r.exit_code == 0, r.output
        assert "$/1M output tokens" in r.output


def _brute_force_cheapest(st_: Stack, gpus: list[str]) -> float:
    """Independent enumeration: every instance × precision × TP, sized with the formula."""
    w, hw = st_.workload, st_.hardware
    m = CAT.model(w.model)
    shape = WorkloadShape.from_spec(w)
    best = math.inf
    for inst in CAT.instances.values():
        if inst.gpu not in gpus or inst.gpu_count < 1 or not CAT.offered_azs(inst.instance_type, st_.region):
            continue
        price = CAT.price(inst.instance_type, st_.region, "on-demand")
        if price is None:
            continue
        n = int(inst.gpu_count)
        for prec in w.precisions:
            if CAT.precision(prec).needs_prequantized_checkpoint and prec not in w.checkpoints:
                continue
            for tp in (1, 2, 4, 8):
                if tp > n or n % tp or m.num_attention_heads % tp:
                    continue
                if not memory_fit(CAT, ReplicaConfig(m, inst.gpu, prec, tp, kv_cache_dtype=w.kv_cache_dtype,
                                                     engine=w.engine), w.context_tokens,
                                  gpu_memory_gib=inst.gpu_memory_gib_each).fits:
                    continue
                g = goodput(CAT, ReplicaConfig(m, inst.gpu, prec, tp, 1, w.kv_cache_dtype, w.engine,
                                               inst.gpu_interconnect), shape, w.slo.ttft_p95_ms, w.slo.itl_p95_ms)
                if not g.feasible:
                    continue
                users = w.traffic.concurrent_users or 0
                need = max(math.ceil(users * w.tokens_per_s_per_user / g.output_tokens_per_s - 1e-9),
                           math.ceil(users / g.concurrency - 1e-9), 1)
                per_node = n // tp
                # spares are whole nodes when a node holds several replicas (the failure unit)
                nodes = need + hw.redundancy if per_node == 1 else math.ceil(need / per_node) + hw.redundancy
                best = min(best, nodes * price.usd_per_hour)
    return best


@pytest.mark.parametrize("users", [20, 100, 700])
def test_planner_never_costlier_than_brute_force(users: int) -> None:
    gpus = ["L4", "L40S", "A10G", "A100-80GB", "H100-SXM"]
    s = stack("dev", f"workload.traffic.concurrent_users={users}", f"hardware.gpus={json.dumps(gpus)}")
    p = plan_stack(s, CAT, goodput_scale=None)
    assert p.totals.usd_per_hour <= _brute_force_cheapest(s, gpus) + 1e-6


FIXED = ["hardware.instance_types=[g6e.xlarge]", "workload.precision=fp8"]


def _more_users_never_fewer_gpus(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    p_lo = plan("dev", f"workload.traffic.concurrent_users={lo}", *FIXED)
    p_hi = plan("dev", f"workload.traffic.concurrent_users={hi}", *FIXED)
    assert p_hi.totals.gpus >= p_lo.totals.gpus
    auto_lo = plan("dev", f"workload.traffic.concurrent_users={lo}")
    auto_hi = plan("dev", f"workload.traffic.concurrent_users={hi}")
    assert auto_hi.totals.usd_per_hour >= auto_lo.totals.usd_per_hour - 1e-9


def test_more_users_never_fewer_gpus_at_two_loads() -> None:
    """The property below at one pair of loads, in the fast default run."""
    _more_users_never_fewer_gpus(100, 1500)


def test_more_users_never_cheaper_when_tuning_favours_the_other_family() -> None:
    """hypothesis found it (a=755, b=775 on dev): only the analytic-cheapest finalists were tuned, all
    scale-out there, so 755 users got 41 x g6e.xlarge ($76.30/h) while 775 users, whose analytic ranking
    let an H100 in, got 9 x p5.4xlarge ($61.92/h). The cheapest candidate of each family is a finalist."""
    _more_users_never_fewer_gpus(755, 775)


@pytest.mark.slow  # 60 tuned plans (about 7 CPU s): the full property runs in scripts/check.sh and CI
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=1, max_value=3000), st.integers(min_value=1, max_value=3000))
def test_more_users_never_fewer_gpus(a: int, b: int) -> None:
    _more_users_never_fewer_gpus(a, b)


@pytest.mark.slow  # 24 tuned plans, each simulating its finalists
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.floats(min_value=15, max_value=200), st.floats(min_value=15, max_value=200))
def test_tighter_itl_never_cheaper(x: float, y: float) -> None:
    """Exact for the analytic search. Once the finalists' flags are tuned and simulated, each finalist's
    simulated goodput is monotone in the target (sizing/planning/batching.py steps one SLO-independent
    lattice of loads), but which candidates are finalists still depends on the target: hence the tolerance."""
    tight, loose = sorted((x, y))

    def cost(itl: float, tune: bool) -> float:
        try:
            return plan_stack(stack("dev", f"workload.slo.itl_p95_ms={itl}"), CAT, goodput_scale=None,
                              tune_batching=tune).totals.usd_per_hour
        except NoFeasiblePlanError:
            return math.inf

    assert cost(tight, False) >= cost(loose, False) - 1e-9
    assert cost(tight, True) >= cost(loose, True) * (1 - TUNED_MONOTONE_TOLERANCE) - 1e-9


TUNED_MONOTONE_TOLERANCE = 0.05  # see test_tighter_itl_never_cheaper; a known limit, in the closing note


def test_tighter_itl_never_cheaper_when_tuning_favours_another_gpu() -> None:
    """hypothesis found it (x=114, y=138 on dev): at ITL 138 ms only two L40S candidates were tuned and the
    plan was 2 x g6e.xlarge ($3.72/h), while at 114 ms the T4s, tuned, met the tighter target at $3.16/h.
    The cheapest candidate of each GPU type near the cheapest cost is a finalist now (18 % dearer before;
    within the simulation back-off's TUNED_MONOTONE_TOLERANCE after: 4 x g6.xlarge, $3.22/h)."""
    def cost(itl: float) -> float:
        return plan_stack(stack("dev", f"workload.slo.itl_p95_ms={itl}"), CAT, goodput_scale=None).totals.usd_per_hour

    assert cost(114.0) >= cost(138.0) * (1 - TUNED_MONOTONE_TOLERANCE) - 1e-9


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2), st.integers(min_value=10, max_value=2000))  # N+2 always allowed (spec)
def test_redundancy_adds_exactly_its_replicas(r: int, users: int) -> None:
    base = plan("dev", f"workload.traffic.concurrent_users={users}", "hardware.redundancy=0", *FIXED)
    more = plan("dev", f"workload.traffic.concurrent_users={users}", f"hardware.redundancy={r}", *FIXED)
    assert more.pools[0].replicas - base.pools[0].replicas == r
    assert more.pools[0].replicas_for_demand == base.pools[0].replicas_for_demand


def test_strategies_respect_families() -> None:
    up = plan("dev", "hardware.strategy=scale-up")
    out = plan("dev", "hardware.strategy=scale-out")
    assert all(p.instance_type.startswith("p") for p in up.pools)
    assert all(p.instance_type.startswith("g") for p in out.pools)


def test_mixed_never_costlier_than_single_pool() -> None:
    for users in (100, 1000):
        single = plan("dev", f"workload.traffic.concurrent_users={users}")
        mixed = plan("dev", f"workload.traffic.concurrent_users={users}", "hardware.strategy=mixed")
        assert mixed.totals.usd_per_hour <= single.totals.usd_per_hour + 1e-6
        assert math.isclose(sum(p.demand_share for p in mixed.pools), 1.0, rel_tol=1e-3)


def test_purchase_mixed_keeps_on_demand_floor() -> None:
    p = plan("prod", "hardware.purchase=mixed", "hardware.spot_on_demand_floor=0.5")
    kinds = {x.purchase for x in p.pools}
    assert "on-demand" in kinds
    od = sum(x.replicas for x in p.pools if x.purchase == "on-demand")
    assert od >= sum(x.replicas for x in p.pools) / 2


def test_other_regions_plan_at_their_own_prices() -> None:
    # every region is bundled now (tests/test_regions.py covers a region without data)
    p = plan("dev", "region=eu-west-1")
    for pool in p.pools:
        price = CAT.price(pool.instance_type, "eu-west-1", "on-demand")
        assert price is not None and pool.usd_per_instance_hour == pytest.approx(price.usd_per_hour)


@pytest.mark.parametrize("name", ["dev", "scaleup-a100", "llama405b"])
def test_pod_requests_fit_the_node(name: str) -> None:
    from sizing.planning.allocatable import node_allocatable

    for pool in plan(name).pools:
        inst = CAT.instance(pool.instance_type)
        per_node = pool.replicas_per_instance if pool.pipeline_parallel == 1 else 1
        node = node_allocatable(CAT, inst)  # nodeadm kube-reserved, eviction, VM overhead, DaemonSets
        assert 0 < pool.cpu_millicores_per_replica * per_node <= node.for_pods_cpu_millicores, pool.name
        assert 0 < pool.memory_mib_per_replica * per_node <= node.for_pods_memory_mib, pool.name
