"""A dedicated layout deploys as planned (issue 33): when the replay finds a pool per request class cheaper
(Plan.fleet.layout dedicated), the plan has one pool per class with that class's replicas, each pool
serves the model as `<name>-<class>` (the stack's first class also the plain name), its KEDA bounds come
from its class's load, and the smoke Job asks every class's name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# 8k-token-class prefills beside a 250 ms TTFT target: mixed, the chat class's tail binds the whole pool
WORKLOAD = {"model": MODEL, "traffic": {"peak_requests_per_s": 30}, "classes": [
    {"name": "chat", "prompt_tokens": 1024, "output_tokens": 256, "slo": {"ttft": {"p95": 250}}, "share": 0.8},
    {"name": "rag", "prompt_tokens": 30000, "output_tokens": 300, "slo": {"ttft": {"p95": 20000}}, "share": 0.2}]}


def _stack() -> Any:
    from sizing.stack import stack_from_config

    cfg = {"aws:region": "us-east-1", "llmcap:workload": WORKLOAD,
           "llmcap:hardware": {"gpus": ["H100-SXM"], "redundancy": 0}}
    return stack_from_config("t", cfg, "test", Path.cwd())


@pytest.fixture(scope="module")
def plan() -> Any:
    from sizing.catalog.lookup import load_catalog
    from sizing.planning.planner import plan_stack

    return plan_stack(_stack(), load_catalog(), goodput_scale=None)


def test_one_pool_per_class_with_its_replicas(plan: Any) -> None:
    assert plan.fleet is not None and plan.fleet.layout == "dedicated", plan.fleet
    by = {p.request_class: p for p in plan.pools}
    assert set(by) == {"chat", "rag"} and len({p.name for p in plan.pools}) == 2
    for name, n in plan.fleet.replicas_by_class.items():
        assert by[name].replicas_for_demand == n
    assert sum(p.replicas_for_demand for p in plan.pools) == plan.fleet.replicas
    assert plan.totals.instances == sum(p.instances_desired for p in plan.pools)


def test_each_class_pool_serves_its_own_name_and_the_first_the_plain_one(plan: Any) -> None:
    from infra.kubernetes import smoke
    from infra.kubernetes.vllm_args import ModelSource, serve_args

    by = {p.request_class: p for p in plan.pools}
    short = by["chat"].vllm.served_model_name.removesuffix("-chat")
    assert by["chat"].vllm.served_model_name == f"{short}-chat" and by["chat"].vllm.served_model_aliases == [short]
    assert by["rag"].vllm.served_model_name == f"{short}-rag" and by["rag"].vllm.served_model_aliases == []
    args = serve_args(by["chat"], ModelSource(path="/models/x"), 8000)
    i = args.index("--served-model-name")
    assert args[i + 1:i + 3] == [f"{short}-chat", short] and args[i + 3].startswith("--")
    assert smoke.served_models(plan) == [f"{short}-chat", short, f"{short}-rag"]
    assert plan.fleet.default_class == "chat"
    assert f"{short}-rag" in plan.fleet.why  # the plan tells clients which name each class uses


def test_each_class_pool_scales_on_its_own_figures(plan: Any) -> None:
    from infra.kubernetes import autoscaling

    by = {p.request_class: p for p in plan.pools}
    assert set(plan.fleet.class_autoscaling) == {"chat", "rag"}
    for name, pool in by.items():
        a = plan.fleet.class_autoscaling[name]
        so = autoscaling.pool_scaled_object(pool, "llm", autoscaling.queue_threshold(plan, pool),
                                            autoscaling.min_replicas(plan, pool))
        assert so["spec"]["minReplicaCount"] == min(a.min_replicas, pool.replicas)
        assert so["spec"]["triggers"][0]["metadata"]["threshold"] == str(max(a.queue_threshold, _min_threshold()))
        assert so["spec"]["scaleTargetRef"]["name"].endswith(pool.name)


def test_the_fit_check_covers_every_class_pool(plan: Any) -> None:
    from infra.fit.check import FitContext, check_deployable
    from sizing.catalog.lookup import load_catalog

    report = check_deployable(FitContext(stack=_stack(), plan=plan, catalog=load_catalog(), api_key="k"))
    assert report.ok, report.lines()
    shown = " ".join(str(r) for r in report.rows)
    assert all(p.name in shown for p in plan.pools)  # a row (node capacity) per class pool


def _min_threshold() -> int:
    from infra.config import settings

    return int(settings.policy().autoscaling.minimum_threshold)
