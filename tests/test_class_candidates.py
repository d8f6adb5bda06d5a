"""Request classes in the planner's analytic pre-search and in a dedicated layout's pools.

Defects (found on the bundled `classes` stack: chat 1,024 in with TTFT p95 ≤ 300 ms, rag 30,000 in with
TTFT p95 ≤ 20 s, Llama-3.1-8B on H100):
- the pre-search judged every candidate on the mix's longest prompt (rag's 30,000 tokens) against the
  tightest target (chat's 300 ms), so one H100 (and TP2, TP4) was rejected with "prefill of a
  30000-token prompt alone takes 1108 ms > 300 ms", a target no rag request has; the plan was 40 H100s
  in TP8 replicas for an 8B model;
- a dedicated layout's rag pool printed the mix's figures against chat's target ("TTFT p95 459 ms
  (SLO 300 ms)").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sizing.spec import WorkloadSpec

ROOT = Path(__file__).resolve().parents[1]

CLASSES = {
    "model": "meta-llama/Llama-3.1-8B-Instruct", "precision": "fp16",
    "traffic": {"peak_requests_per_s": 30},
    "classes": [
        {"name": "chat", "prompt_tokens": 1024, "output_tokens": 256, "slo": {"ttft": {"p95": 300}}, "share": 0.8},
        {"name": "rag", "prompt_tokens": 30000, "output_tokens": 300, "slo": {"ttft": {"p95": 20000}}, "share": 0.2},
    ],
}


@pytest.fixture(scope="module")
def plan():  # type: ignore[no-untyped-def]
    from sizing.planning.planner import plan_for

    return plan_for(ROOT / "stacks" / "Pulumi.classes.yaml")


def test_a_class_is_judged_on_its_own_prompts_and_targets(plan) -> None:  # type: ignore[no-untyped-def]
    wrong = [r for r in plan.rejections if r.reason == "misses-ttft" and "30000-token" in r.detail
             and "> 300 ms" in r.detail]
    assert not wrong, [(r.instance_type, r.tensor_parallel, r.detail) for r in wrong]


def test_the_classes_plan_is_not_tp8_for_an_8b_model(plan) -> None:  # type: ignore[no-untyped-def]
    # one H100 prefills chat's 1,024 tokens in tens of ms and rag's 30,000 well within 20 s: the replay sizes
    # the pools of single-GPU (or small-TP) replicas; TP8 was only chosen because of the mixed-up target
    assert all(p.tensor_parallel < 8 for p in plan.pools), [(p.name, p.tensor_parallel) for p in plan.pools]
    assert plan.totals.gpus < 40


def test_a_dedicated_pool_shows_its_own_class(plan) -> None:  # type: ignore[no-untyped-def]
    from sizing.report.plan_views import pool_fields

    assert plan.fleet is not None and plan.fleet.layout == "dedicated"
    for p in plan.pools:
        assert p.request_class in ("chat", "rag")
        target = 300.0 if p.request_class == "chat" else 20000.0
        fields = dict(pool_fields(plan, p))
        assert f"(SLO {target:,.0f} ms)" in fields["TTFT p95"], (p.request_class, fields["TTFT p95"])
        assert p.per_replica.ttft_p95_ms <= target, (p.request_class, p.per_replica.ttft_p95_ms)


def test_class_workload_is_the_class_alone() -> None:
    from sizing.planning.class_shapes import class_workload

    w = WorkloadSpec.model_validate(CLASSES)
    rag = class_workload(w, w.request_classes[1])
    assert not rag.classes and rag.prompt_tokens.mean == 30000 and rag.output_tokens.mean == 300
    assert rag.slo.targets() == (("ttft", "p95", 20000.0),)
    assert rag.traffic.peak_requests_per_s == pytest.approx(6.0)


def test_the_mix_goodput_is_the_harmonic_mean_of_the_classes() -> None:
    from sizing.perf.load import Goodput
    from sizing.planning.class_shapes import mix_goodput

    a = Goodput(True, 1000.0, 4.0, 10.0, None, "")  # 4 req/s of 250 tokens
    b = Goodput(True, 300.0, 1.0, 5.0, None, "")  # 1 req/s of 300 tokens
    g = mix_goodput([(a, 0.8, 250.0), (b, 0.2, 300.0)])
    # a replica spends 0.8/4 + 0.2/1 = 0.4 s per request of the mix: 2.5 req/s
    assert g.requests_per_s == pytest.approx(2.5)
    assert g.output_tokens_per_s == pytest.approx(2.5 * (0.8 * 250 + 0.2 * 300))
    assert g.feasible


def test_a_closed_loop_class_with_only_a_ttft_target_keeps_the_mixes_rate() -> None:
    from sizing.planning.class_shapes import class_workload

    data = {**CLASSES, "traffic": {"concurrent_users": 100}}
    data["classes"] = [dict(CLASSES["classes"][0]), {**CLASSES["classes"][1], "slo": {"itl": {"p95": 40}}}]
    w = WorkloadSpec.model_validate(data)
    chat = class_workload(w, w.request_classes[0])  # only a TTFT target: the mix's 1000/40 tokens/s per user
    assert chat.traffic.concurrent_users == 80 and chat.tokens_per_s_per_user == pytest.approx(25.0)
    rag = class_workload(w, w.request_classes[1])
    assert rag.traffic.concurrent_users == 20 and rag.tokens_per_s_per_user == pytest.approx(25.0)


def test_compare_judges_each_class_on_its_own_targets() -> None:
    import json

    from sizing.analysis.compare import slo_figures
    from sizing.plan import Plan

    doc = json.loads((ROOT / "stacks" / "Pulumi.classes.plan.json").read_text(encoding="utf-8"))
    plan = Plan.model_validate(doc["plan"])
    figures, headroom = slo_figures(plan, plan.workload.slo)
    # before: one "TTFT p95" figure, the slowest pool's (rag's long prompts) against chat's 300 ms (-4568%)
    assert [f.split(":")[0] for f in figures] == ["chat", "rag"], figures
    rag = next(c for c in plan.classes if c.name == "rag")
    assert figures[1].startswith("rag: TTFT p95 ") and f"({1 - rag.ttft_ms.p95 / 20000:.0%})" in figures[1]
    assert headroom == pytest.approx(min(1 - c.ttft_ms.p95 / c.targets[0].ms for c in plan.classes), abs=1e-4)
    assert headroom > 0


def test_a_user_level_of_a_ttft_only_rate_stack_gets_the_planned_per_user_rate() -> None:
    # `llmcap report stacks/Pulumi.classes.yaml` stopped at its first user level: "with concurrent_users
    # and only a TTFT target, give traffic.tokens_per_s_per_user"
    import json

    from sizing.analysis.capacity import cell_of, planned_tokens_per_s, users_set
    from sizing.errors import SpecError
    from sizing.plan import Plan

    plan = Plan.model_validate(json.loads((ROOT / "stacks" / "Pulumi.classes.plan.json").read_text())["plan"])
    tps = planned_tokens_per_s(plan)
    assert tps is not None and tps > 0
    assert json.loads(users_set(plan, 100).split("=", 1)[1]) == {"concurrent_users": 100, "tokens_per_s_per_user": tps}

    def refuses(sets: list[str]) -> Plan:
        raise SpecError("llmcap:workload: a level the stack cannot be asked at")

    cell = cell_of("H100-SXM", 100, ["x"], refuses)  # one cell's bad level is that cell's reason, not the report's end
    assert not cell.feasible and "cannot be asked" in (cell.reason or "")


def test_classes_with_shares_of_concurrent_users_are_replayed() -> None:
    # before: ValueError "classes with shares need the workload's traffic as peak_requests_per_s", a traceback
    # from `llmcap plan` (and `llmcap report`, whose capacity table asks every stack at user levels)
    from sizing.planning.class_shapes import class_requests_per_s
    from sizing.planning.planner import plan_for

    data = {**CLASSES, "traffic": {"concurrent_users": 50, "tokens_per_s_per_user": 30}}
    w = WorkloadSpec.model_validate(data)
    chat, rag = w.request_classes
    assert class_requests_per_s(w, chat) == pytest.approx(40 * 30 / 256)  # 40 users, a 256-token reply each 8.5 s
    assert class_requests_per_s(w, rag) == pytest.approx(10 * 30 / 300)
    plan = plan_for(ROOT / "stacks" / "Pulumi.classes.yaml",
                    ['workload.traffic={"concurrent_users":50,"tokens_per_s_per_user":30}'])
    assert plan.fleet is not None and {c.name for c in plan.classes} == {"chat", "rag"}
    assert all(c.slo_met for c in plan.classes)


def test_a_replayed_plan_has_every_figure_a_number(tmp_path: Path) -> None:
    # found by the fuzz (classes in generated stacks): class c1's pool's analytic mean TTFT was infinite (no
    # steady state at its mean load, where the replay found one), written as null, and `llmcap diff` and a
    # saved plan could not read the plan back (pydantic float_type)
    import json

    from sizing.plan import Plan
    from sizing.planning.planner import plan_for

    f = tmp_path / "Pulumi.c129.yaml"
    f.write_text("""config:
  aws:region: us-east-1
  llmcap:workload:
    model: mistral-7b-instruct-v0.3
    traffic: {peak_requests_per_s: 172.401}
    prefix_cache_hit_rate: 0.13
    classes:
    - {name: c0, prompt_tokens: 64, output_tokens: 1023, slo: {e2e: {p99: 60000}}, share: 0.2}
    - {name: c1, prompt_tokens: 1024, output_tokens: 37, slo: {e2e: {p99: 60000}}, share: 0.8}
  llmcap:hardware:
    instance_types: [g6.12xlarge]
    strategy: mixed
""")
    plan = plan_for(f)
    doc = json.loads(plan.model_dump_json())
    for p in doc["pools"]:
        assert all(v is not None for k, v in p["per_replica"].items() if k.endswith("_ms")), p["name"]
    Plan.model_validate(doc)  # reads back
