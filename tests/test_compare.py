"""sizing.analysis.compare and .sweep: re-sizing agrees with evaluation, sweeps agree with the planner, crossovers and
feasibility edges are found where constructed curves cross, the verdict gives its reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from sizing.analysis.compare import blast_radius, verdict
from sizing.analysis.comparison import InfeasibleOption, Option, OptionRow, SweepPoint
from sizing.analysis.sweep import (
    find_crossovers,
    find_feasibility_edges,
    parse_sweep,
    priced_point,
    run_sweep,
    with_value,
)
from sizing.catalog.lookup import Catalog, load_catalog
from sizing.errors import SpecError
from sizing.planning.candidates import resize
from sizing.planning.demand import demand_of
from sizing.planning.mix import best_mix
from sizing.planning.planner import plan_stack
from sizing.planning.problem import PlanningProblem
from sizing.planning.search import evaluate, search
from sizing.stack import Stack, load_stack
from tests.compare_factory import option_row
from tests.plan_factory import make_plan, make_pool

STACKS = Path(__file__).resolve().parents[1] / "stacks"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLMCAP_CALIBRATION_OVERLAY", str(tmp_path / "no-overlay.json"))
    monkeypatch.delenv("LLMCAP_CATALOG_DIR", raising=False)


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog()


def _stack(name: str) -> Stack:
    return load_stack(STACKS / f"Pulumi.{name}.yaml", [])


def _l4_a100() -> list[Option]:
    a, b = _stack("scaleout-l4"), _stack("scaleup-a100")
    return [Option("L4", a, "scale-out"), Option("A100", b, "scale-up")]


# ------------------------------------------------------------------ resize == evaluate


@pytest.mark.parametrize("name", ["scaleout-l4", "scaleup-a100"])
@pytest.mark.parametrize("var,values", [("users", [1, 7, 100, 333, 5000]), ("rate", [0.05, 1.0, 37.5])])
def test_resize_agrees_with_evaluate(cat: Catalog, name: str, var: str, values: list[float]) -> None:
    st = _stack(name)
    w0 = with_value(st.workload, var, values[0])
    model = cat.model(st.workload.model)
    base = search(PlanningProblem.of(cat, model, w0, st.hardware, st.region), st.hardware.strategy)
    assert base.feasible, f"{name}: nothing feasible, the test would check nothing"
    for x in values:
        w = with_value(st.workload, var, x)
        d = demand_of(w)
        for ev in base.feasible:
            direct = evaluate(PlanningProblem(cat, model, w, st.hardware, st.region, d), "on-demand", ev.cand, [])
            assert direct is not None
            got = resize(ev, d, st.hardware.redundancy)
            assert (got.replicas_for_demand, got.replicas, got.instances) == (
                direct.replicas_for_demand, direct.replicas, direct.instances), f"{ev.cand.label()} at {var}={x}"
            assert got.usd_per_hour == pytest.approx(direct.usd_per_hour)


# ------------------------------------------------------------------ sweeps agree with the planner


@pytest.mark.parametrize("name,strategy", [("scaleout-l4", "scale-out"), ("scaleup-a100", "scale-up"),
                                           ("dev", "mixed"), ("dev", "auto")])
def test_users_sweep_point_equals_the_plan(cat: Catalog, name: str, strategy: str) -> None:
    st = _stack(name)
    users = st.workload.traffic.concurrent_users
    assert users is not None
    sw = run_sweep([Option(name, st, strategy)], parse_sweep(f"users={users // 2}..{users}:2"), cat, refine=False)
    plan = plan_stack(st, cat, strategy, None)
    pt = sw.series[name][-1]
    assert pt.x == users
    assert pt.usd_per_month == pytest.approx(plan.totals.usd_per_month, abs=0.01)
    assert pt.usd_per_million_output_tokens == pytest.approx(plan.totals.usd_per_million_output_tokens, abs=1e-3)


# the fast run keeps mixed over ITL and scale-out over prompt length; CI the other two pairs as well
@pytest.mark.parametrize("var,spec,strategy", [
    ("itl_ms", "itl_ms=12..60:9", "mixed"),
    ("prompt_tokens", "prompt_tokens=256..6000:7", "scale-out"),
    pytest.param("itl_ms", "itl_ms=12..60:9", "scale-out", marks=pytest.mark.slow),
    pytest.param("prompt_tokens", "prompt_tokens=256..6000:7", "mixed", marks=pytest.mark.slow),
])
def test_pruned_per_point_sweep_equals_full_search(cat: Catalog, var: str, spec: str, strategy: str) -> None:
    """Bounded evaluation must find the same cheapest plan as evaluating every candidate."""
    st = _stack("dev")
    sw = run_sweep([Option("o", st, strategy)], parse_sweep(spec), cat, refine=False)
    model = cat.model(st.workload.model)
    for pt in sw.series["o"]:
        w = with_value(st.workload, var, pt.x)
        full = search(PlanningProblem.of(cat, model, w, st.hardware, st.region), strategy)
        if not full.feasible:
            assert pt.usd_per_hour is None, f"{var}={pt.x}"
            continue
        if strategy == "mixed":
            mix = best_mix(full.feasible, st.hardware.redundancy)
            assert mix is not None
            want = mix.usd_per_hour
        else:
            assert full.best is not None
            want = full.best.usd_per_hour
        assert pt.exact_usd_per_hour == pytest.approx(want), f"{var}={pt.x}: {pt.deployment}"


def test_200_point_users_sweep_prices_every_point(cat: Catalog) -> None:
    """How fast (target < 5 s): `python bench/sweep_speed.py` times this sweep and five others."""
    sw = run_sweep(_l4_a100(), parse_sweep("users=10..5000:200"), cat)
    assert len(sw.values) > 150
    for name in ("L4", "A100"):
        assert len(sw.series[name]) == len(sw.values)
        assert all(pt.usd_per_hour is not None and pt.usd_per_hour > 0 for pt in sw.series[name]), name


# ------------------------------------------------------------------ crossovers and edges


def _series(xs: list[float], ys: list[float | None]) -> list[SweepPoint]:
    return [priced_point(x, y, None, 0, "") for x, y in zip(xs, ys, strict=True)]


def test_crossover_found_where_constructed_curves_cross() -> None:
    xs = [1.0, 2.0, 3.0, 4.0, 5.0]
    series = {"small": _series(xs, [1, 2, 3, 4, 5]), "big": _series(xs, [3.5, 3.5, 3.5, 3.5, 3.5])}
    [c] = find_crossovers("users", series)
    assert (c.cheaper_before, c.cheaper_after, c.last_x_before, c.x) == ("small", "big", 3.0, 4.0)
    # refined between two swept values: small costs x, big costs 3.5 → big is cheaper from 4 on
    wide = {"small": _series([1.0, 10.0], [1, 10]), "big": _series([1.0, 10.0], [3.5, 3.5])}
    [r] = find_crossovers("users", wide, lambda name, x: x if name == "small" else 3.5)
    assert (r.last_x_before, r.x) == (3.0, 4.0)
    assert r.usd_per_month_at_x == {"small": 4 * 730, "big": 3.5 * 730}
    assert "big becomes cheaper than small" in r.text


def test_no_crossover_when_curves_do_not_cross_or_one_is_infeasible() -> None:
    xs = [1.0, 2.0, 3.0]
    assert find_crossovers("users", {"a": _series(xs, [1, 2, 3]), "b": _series(xs, [2, 3, 4])}) == []
    # order flips only across an infeasible gap of b: still a crossover between the feasible points
    got = find_crossovers("users", {"a": _series(xs, [1, 2, 5]), "b": _series(xs, [2, None, 4])})
    assert [(c.last_x_before, c.x) for c in got] == [(1.0, 3.0)]
    # ties are not crossovers
    assert find_crossovers("users", {"a": _series(xs, [1, 2, 2]), "b": _series(xs, [2, 2, 2])}) == []


def test_feasibility_edge_found_and_refined() -> None:
    xs = [10.0, 20.0, 30.0]
    series = {"L4": _series(xs, [None, 5, 4]), "A100": _series(xs, [9, 8, 7])}
    [e] = find_feasibility_edges("itl_ms", series, lambda n, x: None if n == "L4" and x < 13.7 else 1.0)
    assert e.option == "L4" and e.feasible == "above"
    assert 13.7 <= e.x <= 14.7 and e.other_x < 13.7


# ------------------------------------------------------------------ verdict, blast radius


def _row(label: str, usd: float, blast: float = 0.5, feasible: bool = True) -> OptionRow:
    if not feasible:
        return InfeasibleOption(label=label, stack=label, strategy="auto", problems=["x", f"{label}: misses-itl"],
                                suggestions=[])
    return option_row(label, usd, blast, [label])


def test_verdict_names_the_cheaper_option_and_why() -> None:
    win, why = verdict([_row("a", 1000.0, 0.5), _row("b", 800.0, 0.25), _row("c", 0, feasible=False)])
    assert win == "b"
    assert "b costs $200/month less than a" in why and "20% cheaper" in why
    assert "no plan meets the SLO for c" in why
    win, why = verdict([_row("a", 800.0, 0.5), _row("b", 1000.0, 0.1)])
    assert win == "a" and "one node failure takes 50%" in why
    win, why = verdict([_row("a", 0, feasible=False)])
    assert win is None and "a: misses-itl" in why


def test_blast_radius_is_share_of_capacity_on_one_node() -> None:
    plan = make_plan([make_pool(replicas=5, replicas_per_instance=4)])
    assert blast_radius(plan) == pytest.approx(4 / 5)
    pp = make_plan([make_pool(replicas=3, replicas_per_instance=1, nodes_per_replica=2, pp=2)])
    assert blast_radius(pp) == pytest.approx(1 / 3)


# ------------------------------------------------------------------ sweep spec


@pytest.mark.parametrize("text,n,first,last", [
    ("users=10..2000", 60, 10, 2000), ("users=10..2000:5", 5, 10, 2000), ("itl_ms=10..60/5", 11, 10, 60),
    ("rate=0.5..4:3", 3, 0.5, 4), ("prompt_tokens=128..4096/128", 32, 128, 4096)])
def test_parse_sweep(text: str, n: int, first: float, last: float) -> None:
    s = parse_sweep(text)
    assert (len(s.values), s.values[0], s.values[-1]) == (n, first, pytest.approx(last))
    assert list(s.values) == sorted(s.values)


@pytest.mark.parametrize("text", ["users", "users=10", "users=10..", "gpus=1..8", "users=100..10", "users=0..10",
                                  "users=1..10:1", "itl_ms=10..60/0", "users=1..10:abc"])
def test_parse_sweep_rejects(text: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_sweep(text)
    assert e.value.problems[0].startswith("--sweep")

