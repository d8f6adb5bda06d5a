"""Issue 14 item 11 (partial): the weights Job pins the checkpoint's Hugging Face revision; the
Deployment await covers image pull and S3 sync; compose refuses an empty VLLM_API_KEY; the default
--max-model-len serves more than the mean request (the model's context limit, within what the KV cache
holds); --max-num-seqs admits the planned load (issue 18 item 7)."""

from __future__ import annotations

import math

import pytest

from sizing.catalog.lookup import load_catalog
from tests.k8s_support import objects, rendered
from tests.pulumi_harness import pins


def test_copy_job_pins_the_checkpoint_revision() -> None:
    result, _ = rendered("llama70b")
    pool = result.plan.pools[0]
    assert pool.checkpoint_revision == "1605565b47bb9346c5515c34102e054115b4f98b"
    job = next(o for o in objects("llama70b") if o["kind"] == "Job" and o["metadata"]["name"] != "llmcap-smoke")
    cmd = job["spec"]["template"]["spec"]["initContainers"][0]["command"]
    assert cmd[cmd.index("--revision") + 1] == pool.checkpoint_revision


def test_unpinned_checkpoint_is_a_plan_warning() -> None:
    result, _ = rendered("scaleout-l4")  # casperhansen/llama-3-8b-instruct-awq: no recorded revision
    assert result.plan.pools[0].checkpoint_revision is None
    assert any("revision" in w and result.plan.pools[0].vllm.model in w for w in result.plan.warnings)


def test_rollout_await_covers_image_pull_and_weights_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    import pulumi

    from infra.kubernetes import serving
    from infra.program import render_stack
    from sizing.stack import load_stack
    from tests.k8s_support import ROOT

    seen: list[str] = []
    real = pulumi.CustomTimeouts

    class Recording(real):  # type: ignore[misc,valid-type]
        def __init__(self, create: str | None = None, update: str | None = None, delete: str | None = None):
            seen.append(create or "")
            super().__init__(create=create, update=update, delete=delete)
    monkeypatch.setattr(pulumi, "CustomTimeouts", Recording)
    from sizing.perf.cold_start import before_engine_s, cold_start
    from sizing.planning.node_storage import loading_mode

    result, _ = rendered("llama405b")
    pool = result.plan.pools[0]
    mode = loading_mode(pool, True)
    terms = {t.name: t.seconds for t in cold_start(pool, mode).terms}
    assert mode == "nvme" and terms["image pull"] > 0 and terms["S3 sync"] > 0
    budget = serving.rollout_budget_s(pool, before_engine_s(pool, mode))
    assert budget >= terms["node boot"] + terms["image pull"] + terms["S3 sync"] + serving.startup_budget_s(pool)
    render_stack(load_stack(ROOT / "stacks" / "Pulumi.llama405b.yaml"), result.plan, load_catalog(), pins())
    assert f"{math.ceil((budget + 600) / 60)}m" in seen, seen


def test_compose_refuses_an_empty_api_key() -> None:
    from infra.compose import build

    result, _ = rendered("dev")
    env = build(result.plan, pins()).compose["services"]["vllm"]["environment"]
    assert env["VLLM_API_KEY"].startswith("${VLLM_API_KEY:?")  # `:?` fails on unset AND empty


def test_default_max_model_len_serves_longer_than_average_requests() -> None:
    cat = load_catalog()
    for stack_id in ("dev", "llama70b", "scaleout-l4"):
        result, _ = rendered(stack_id)
        w = result.plan.workload
        mean_len = w.prompt_tokens.mean + w.output_tokens.mean
        limit = cat.model(result.plan.model).max_position_embeddings
        for pool in result.plan.pools:
            assert pool.vllm.max_model_len > mean_len, f"{stack_id}: {pool.vllm.max_model_len} <= mean {mean_len}"
            assert pool.vllm.max_model_len <= limit


def test_max_num_seqs_admits_the_planned_concurrency() -> None:
    for stack_id in ("dev", "prod", "llama405b", "llama70b", "scaleout-l4", "scaleup-a100"):
        result, _ = rendered(stack_id)
        for pool in result.plan.pools:
            assert pool.vllm.max_num_seqs >= math.ceil(pool.per_replica.planned_concurrency - 1e-9), stack_id
