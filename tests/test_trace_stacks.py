"""The bundled trace stacks (issue 33): stacks/Pulumi.trace-code.yaml plans from a vendored excerpt of the
Azure 2023 code trace, stacks/Pulumi.classes.yaml is a two-class stack the replay deploys `dedicated`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def test_excerpt_is_those_lines_of_the_vendored_trace() -> None:
    excerpt = (ROOT / "stacks" / "traces" / "azure2023_code_busiest.csv").read_bytes().splitlines(keepends=True)
    full = (ROOT / "tests" / "data" / "traces" / "azure2023_code.csv").read_bytes().splitlines(keepends=True)
    assert excerpt == full[:1] + full[1035:2599]  # the header and lines 1,036 - 2,599: 1,564 requests


def _saved(stack: str) -> Any:
    import json

    from sizing.plan import Plan

    doc = json.loads((ROOT / "stacks" / f"Pulumi.{stack}.plan.json").read_text(encoding="utf-8"))
    return Plan.model_validate(doc["plan"])


def test_saved_plans_of_the_trace_stacks() -> None:
    code = _saved("trace-code")
    assert code.trace is not None and code.trace.requests == 1564 and code.trace.peak_requests_per_s_1s >= 72
    assert code.fleet is not None and code.fleet.replicas > code.fleet.mean_based_replicas
    classes = _saved("classes")
    assert classes.fleet is not None and classes.fleet.layout == "dedicated"
    assert sorted(p.request_class or "" for p in classes.pools) == ["chat", "rag"]


def test_the_classes_stack_renders_a_pool_per_class() -> None:
    import json

    from tests.k8s_support import objects

    objs = objects("classes")
    deps = {o["metadata"]["name"] for o in objs if o["kind"] == "Deployment" and "serving" in json.dumps(
        o["metadata"].get("labels", {}))}
    scaled = [o for o in objs if o["kind"] == "ScaledObject"]
    assert any(n.endswith("-chat") for n in deps) and any(n.endswith("-rag") for n in deps), deps
    assert len(scaled) == 2
    job = next(o for o in objs if o["kind"] == "Job" and o["metadata"]["name"] == "llmcap-smoke")
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert json.loads(env["SMOKE_MODELS"]) == ["llama-3.1-8b-instruct-chat", "llama-3.1-8b-instruct",
                                               "llama-3.1-8b-instruct-rag"]
