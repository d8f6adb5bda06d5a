"""A top-level `slo` beside `classes` is the default target of every class that sets none of its own.

Before, such a class was judged at the built-in defaults (TTFT p95 1,000 ms, ITL p95 50 ms) while the
top-level targets the user wrote were kept only as the pre-search summary: a stack that asked for 200 ms
to the first token could be planned and reported at 1,000 ms."""

from __future__ import annotations

from sizing.spec import DEFAULT_SLO_TARGETS, WorkloadSpec

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _spec(top_slo: dict | None, chat_slo: dict | None) -> WorkloadSpec:
    chat = {"name": "chat", "prompt_tokens": 1024, "output_tokens": 256, "share": 0.6}
    if chat_slo is not None:
        chat["slo"] = chat_slo
    rag = {"name": "rag", "prompt_tokens": 8000, "output_tokens": 300, "share": 0.4,
           "slo": {"ttft": {"p95": 4000}}}
    data: dict = {"model": MODEL, "traffic": {"peak_requests_per_s": 4}, "classes": [chat, rag]}
    if top_slo is not None:
        data["slo"] = top_slo
    return WorkloadSpec.model_validate(data)


def _targets(spec: WorkloadSpec, name: str) -> set[tuple[str, str, float]]:
    c = next(c for c in spec.request_classes if c.name == name)
    return set(c.slo.targets())


def test_a_class_without_targets_takes_the_top_level_slo() -> None:
    w = _spec({"ttft": {"p95": 200}, "itl": {"p99": 40}}, None)
    assert _targets(w, "chat") == {("ttft", "p95", 200.0), ("itl", "p99", 40.0)}
    assert _targets(w, "rag") == {("ttft", "p95", 4000.0)}  # a class's own targets win, nothing merged in


def test_without_a_top_level_slo_a_class_keeps_the_defaults() -> None:
    w = _spec(None, None)
    assert _targets(w, "chat") == set(DEFAULT_SLO_TARGETS)


def test_the_summary_is_the_tightest_over_the_classes_as_judged() -> None:
    # the chat class sets 150 ms itself: the summary the pre-search reads cannot be the looser 200 ms
    w = _spec({"ttft": {"p95": 200}}, {"ttft": {"p95": 150}})
    assert ("ttft", "p95", 150.0) in set(w.slo.targets())
    w2 = _spec({"ttft": {"p95": 200}}, None)
    assert set(w2.slo.targets()) == {("ttft", "p95", 200.0)}
