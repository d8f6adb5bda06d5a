"""Issue 14 defect 1: one served model per pool. The weights Job, the S3 prefix, the init container's
sync and `vllm serve`'s model all use the pool's checkpoint (`pool.vllm.model`), never the base
model (`plan.model`); a plan with pools on different checkpoints copies each one."""

from __future__ import annotations

from typing import Any

from infra.config.names import weights_prefix
from infra.kubernetes.k8s_common import serving_name
from infra.kubernetes.manifests import kubernetes_objects
from infra.program import render_stack
from infra.render import resources_document
from sizing.catalog.lookup import load_catalog
from sizing.stack import load_stack
from tests.k8s_support import ROOT, objects, rendered
from tests.plan_factory import make_plan, make_pool
from tests.pulumi_harness import pins


def _jobs(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == "Job" and o["metadata"]["name"] != "llmcap-smoke"]  # the copy Jobs


def _downloaded(job: dict[str, Any]) -> str:
    cmd = job["spec"]["template"]["spec"]["initContainers"][0]["command"]
    return cmd[cmd.index("download") + 1]


def _pod(objs: list[dict[str, Any]], pool_name: str) -> dict[str, Any]:
    w = next(o for o in objs if o["metadata"]["name"] == serving_name(pool_name)
             and o["kind"] in ("Deployment", "LeaderWorkerSet"))
    if w["kind"] == "Deployment":
        return w["spec"]["template"]["spec"]  # type: ignore[no-any-return]
    return w["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]  # type: ignore[no-any-return]


def test_a_stack_copies_and_serves_the_awq_checkpoint_it_plans() -> None:
    # scaleout-l4 plans int4-AWQ (dev ties it with FP8 and takes the higher precision since issue 27)
    result, _ = rendered("scaleout-l4")
    pool = result.plan.pools[0]
    assert pool.vllm.model != result.plan.model  # the premise: it serves a pre-quantized checkpoint
    objs = objects("scaleout-l4")
    jobs = _jobs(objs)
    assert [_downloaded(j) for j in jobs] == [pool.vllm.model]
    upload = jobs[0]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert any(a.endswith(f"/{weights_prefix(pool.vllm.model).strip('/')}/") for a in upload), upload
    pod = _pod(objs, pool.name)
    args = pod["containers"][0]["args"]
    model_arg = args[0]
    sync = [c for c in pod.get("initContainers", []) if c["name"] == "weights-sync"]
    if sync:
        assert weights_prefix(pool.vllm.model).strip("/") in sync[0]["command"][3]
    else:
        assert weights_prefix(pool.vllm.model).strip("/") in model_arg
    assert result.outputs["weightsPrefix"] == weights_prefix(pool.vllm.model)


def test_pools_on_different_checkpoints_each_copy_and_serve_their_own() -> None:
    base = "meta-llama/Meta-Llama-3-8B-Instruct"
    awq = "casperhansen/llama-3-8b-instruct-awq"
    a = make_pool(name="g6-12xlarge", model=base, precision="fp16")
    b = make_pool(name="g6e-xlarge", instance_type="g6e.xlarge", gpu="L40S", gpus_per_instance=1,
                  replicas=2, replicas_per_instance=1, instances_min=2, instances_desired=2, instances_max=3,
                  model=awq, precision="int4-awq", local_nvme_gb=250)
    plan = make_plan([a, b], stack="dev")
    stack = load_stack(ROOT / "stacks" / "Pulumi.dev.yaml")
    objs = kubernetes_objects(resources_document(render_stack(stack, plan, load_catalog(), pins())))
    assert sorted(_downloaded(j) for j in _jobs(objs)) == sorted([base, awq])
    for pool in (a, b):
        pod = _pod(objs, pool.name)
        text = " ".join(pod["containers"][0]["args"]) + " " + " ".join(
            " ".join(c["command"]) for c in pod.get("initContainers", []))
        assert weights_prefix(pool.vllm.model).strip("/") in text, pool.name
        other = b if pool is a else a
        assert weights_prefix(other.vllm.model).strip("/") not in text, pool.name
