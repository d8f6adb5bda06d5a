"""Shared helpers for the Kubernetes-side tests: render a bundled stack under Pulumi's mock engine
once per session and hand out its Kubernetes objects in applied form."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from infra.kubernetes.manifests import kubernetes_objects
from infra.render import RenderResult, resources_document
from sizing.stack import load_stack

ROOT = Path(__file__).resolve().parents[1]
STACK_FILES = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
STACK_IDS = [p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in STACK_FILES]


@cache
def rendered(stack_id: str) -> tuple[RenderResult, list[dict[str, Any]]]:
    """A bundled stack planned and rendered, with its resources document. The render is
    tests/pulumi_harness.bundled's (one mocked run per stack for the whole session); the same as
    render_stack(load_stack(path), plan_for(path)), since a bundled stack has no warnings to merge."""
    from tests.pulumi_harness import bundled

    result = bundled(stack_id)
    assert not load_stack(ROOT / "stacks" / f"Pulumi.{stack_id}.yaml").warnings, stack_id
    return result, resources_document(result)


def objects(stack_id: str) -> list[dict[str, Any]]:
    return kubernetes_objects(rendered(stack_id)[1])


def find(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, f"expected one {kind}/{name}, found {len(hits)}"
    return hits[0]


def flag_values(args: list[str]) -> dict[str, str | None]:
    """`--flag value` pairs (value None for a bare switch)."""
    out: dict[str, str | None] = {}
    for i, a in enumerate(args):
        if a.startswith("--"):
            nxt = args[i + 1] if i + 1 < len(args) else None
            out[a] = None if nxt is None or nxt.startswith("--") else nxt
    return out
