"""Generated valid stacks for the deployability fuzz (tests/test_fit_fuzz.py, bench/fit_fuzz.py).

Each generated stack is planned and checked. The outcomes that are acceptable:
- `rejected-plan`: the planner refuses it with a one-line reason (an LlmcapError: infeasible, unpriced
  region, absurd scale, ...)
- `rejected-fit`: the deployability check refuses it, one line per rule, before anything is rendered
- `ok`: the check passes AND an independent recount over the objects the program would render finds
  0 unschedulable pods (effective requests × pods per node vs the node model, GPUs per node), 0 storage
  overflows (model emptyDir vs checkpoint, disk below eviction) and 0 model mismatches (every pod and
  the copy Job use pool.vllm.model), and the plan is internally consistent (--max-num-seqs admits the
  planned concurrency, capacity >= demand)
Anything else (a traceback, or `ok` with a recount failure) is a bug.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from infra.fit.check import FitContext, check_deployable
from infra.fit.rules import effective_requests, pool_views
from infra.kubernetes.weights import copy_job
from sizing.catalog.lookup import Catalog
from sizing.errors import LlmcapError
from sizing.planning.allocatable import node_allocatable
from sizing.planning.planner import plan_stack
from sizing.stack import stack_from_config

MODELS = ["meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct",
          "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-405B-Instruct", "Qwen/Qwen2.5-7B-Instruct",
          "Qwen/Qwen2.5-32B-Instruct", "Qwen/Qwen3-30B-A3B", "mistralai/Mixtral-8x7B-Instruct-v0.1",
          "google/gemma-2-9b-it", "microsoft/phi-4"]
GPUS = ["A100-40GB", "A100-80GB", "A10G", "H100-SXM", "H200", "L4", "L40S", "T4", "B200"]
REGIONS = ["us-east-1", "us-east-1", "us-east-1", "us-east-1", "us-west-1", "ca-central-1"]
UNSCHEDULABLE_RULES = {"requests-exceed-allocatable", "gpus-exceed-node", "pdb-exceeds-runnable",
                       "node-group-max-below-surge", "node-group-above-quota"}
STORAGE_RULES = {"storage-below-checkpoint"}
MODEL_RULES = {"served-model-mismatch"}
CONSISTENCY_RULES = {"max-num-seqs-below-concurrency", "capacity-below-demand"}


@st.composite
def stack_configs(draw: st.DrawFn, any_gpu: bool = True) -> dict[str, Any]:
    """A valid stack config. `any_gpu=False` always names 1-3 GPU types (a smaller search: faster)."""
    model = draw(st.sampled_from(MODELS))
    precisions = draw(st.lists(st.sampled_from(["bf16", "fp16", "fp8", "int4-awq"]), min_size=1, max_size=3,
                               unique=True))
    workload: dict[str, Any] = {"model": model, "precision": precisions}
    if "int4-awq" in precisions:
        workload["checkpoints"] = {"int4-awq": f"fuzz/{model.split('/')[-1]}-AWQ"}
    prompt = draw(st.integers(64, 8192))
    output = draw(st.integers(16, 2048))
    workload["prompt_tokens"] = ({"mean": prompt, "p95": prompt * draw(st.integers(1, 4))}
                                 if draw(st.booleans()) else prompt)
    workload["output_tokens"] = output
    if draw(st.booleans()):
        workload["traffic"] = {"concurrent_users": draw(st.integers(1, 3000))}
    else:
        workload["traffic"] = {"peak_requests_per_s": draw(st.floats(0.05, 40.0))}
    workload["slo"] = {"ttft_p95_ms": draw(st.integers(500, 10_000)), "itl_p95_ms": draw(st.integers(20, 200))}
    hardware: dict[str, Any] = {
        "strategy": draw(st.sampled_from(["auto", "auto", "scale-out", "scale-up"])),
        "redundancy": draw(st.integers(0, 2)),
        "autoscaling_headroom": draw(st.sampled_from([0.1, 0.25, 0.5, 1.0])),
    }
    if not any_gpu or draw(st.booleans()):
        hardware["gpus"] = draw(st.lists(st.sampled_from(GPUS), min_size=1, max_size=3, unique=True))
    deployment = {"model_cache_on_instance_store": draw(st.booleans())}
    return {"aws:region": draw(st.sampled_from(REGIONS)), "llmcap:workload": workload,
            "llmcap:hardware": hardware, "llmcap:deployment": deployment}


@dataclass
class Outcome:
    kind: str  # ok | rejected-plan | rejected-fit | bug
    rules: list[str] = field(default_factory=list)
    recount: list[str] = field(default_factory=list)  # independent findings on an `ok` plan
    detail: str = ""


def recount(fit: FitContext) -> list[str]:
    """An independent count over what the program would render (not the rules' own verdicts)."""
    found: list[str] = []
    plan, cat = fit.plan, fit.catalog
    for v in pool_views(fit):
        p = v.pool
        node = node_allocatable(cat, cat.instances[p.instance_type])
        for role, pod in v.pods:
            cpu, mem = effective_requests(pod)
            if cpu * v.pods_per_node > node.for_pods_cpu_millicores or mem * v.pods_per_node > node.for_pods_memory_mib:
                found.append(f"unschedulable: {p.name} {role}")
            gpus = int(pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
            if gpus * v.pods_per_node > p.gpus_per_instance:
                found.append(f"unschedulable (GPUs): {p.name} {role}")
            for vol in pod.get("volumes", []):
                if vol["name"] == "models" and float(vol["emptyDir"]["sizeLimit"][:-2]) < p.checkpoint_gib:
                    found.append(f"storage overflow: {p.name} {role}")
            text = " ".join(pod["containers"][0]["args"][:1] + [" ".join(c["command"]) for c in pod.get(
                "initContainers", [])])
            if p.vllm.model.strip("/") not in text:
                found.append(f"model mismatch: {p.name} {role}")
        if v.hosts_copy_job:
            job = copy_job("ns", p.vllm.model, _where(p), plan.region, p, False)
            spec = job["spec"]["template"]["spec"]
            if p.vllm.model not in spec["initContainers"][0]["command"]:
                found.append(f"model mismatch: copy Job of {p.name}")
            if float(spec["volumes"][0]["emptyDir"]["sizeLimit"][:-2]) < p.checkpoint_gib:
                found.append(f"storage overflow: copy Job of {p.name}")
        if p.vllm.max_num_seqs < math.ceil(p.per_replica.planned_concurrency - 1e-9):
            found.append(f"inconsistent: {p.name} --max-num-seqs {p.vllm.max_num_seqs} < planned concurrency")
    t = plan.totals
    if t.capacity_output_tokens_per_s + 0.5 < t.demand_output_tokens_per_s:
        found.append("inconsistent: capacity below demand")
    return found


def _where(p: Any) -> Any:
    from infra.config.names import weights_prefix
    from infra.kubernetes.weights import WeightsLocation

    return WeightsLocation("bucket", weights_prefix(p.vllm.model))


def _platform(fit: FitContext) -> Any:
    from infra.config.platform import load_platform

    return load_platform(fit.stack.deployment)


def evaluate(config: dict[str, Any], cat: Catalog, name: str = "fuzz") -> Outcome:
    try:
        stack = stack_from_config(name, config)
        plan = plan_stack(stack, cat)
    except LlmcapError as e:
        return Outcome("rejected-plan", detail=e.problems[0] if e.problems else str(e))
    fit = FitContext(stack=stack, plan=plan, catalog=cat, api_key="fuzz-key")
    report = check_deployable(fit)
    if not report.ok:
        return Outcome("rejected-fit", rules=sorted({p.rule for p in report.problems}), detail=report.lines()[0])
    found = recount(fit)
    return Outcome("bug" if found else "ok", recount=found, detail="; ".join(found))


def tally(outcomes: list[Outcome]) -> dict[str, int]:
    c: Counter[str] = Counter(o.kind for o in outcomes)
    rules: Counter[str] = Counter(r for o in outcomes for r in o.rules)
    recounts: Counter[str] = Counter(f.split(":")[0] for o in outcomes for f in o.recount)
    return {
        "stacks": len(outcomes), "ok": c["ok"], "rejected by the planner": c["rejected-plan"],
        "rejected by the fit check": c["rejected-fit"], "bugs": c["bug"],
        "unschedulable pods (recount on ok plans)": recounts["unschedulable"] + recounts["unschedulable (GPUs)"],
        "storage overflows (recount on ok plans)": recounts["storage overflow"],
        "model mismatches (recount on ok plans)": recounts["model mismatch"],
        "inconsistent plans (recount on ok plans)": recounts["inconsistent"],
        **{f"rule {r}": n for r, n in sorted(rules.items())},
    }
