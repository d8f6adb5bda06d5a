"""The deployability rules of issue 14: does each pool's plan fit the EKS platform it will run on?

Each rule is a function of a FitContext registered with `@fit_rule` (infra/fit/check.py); it reads the
Plan and the objects the program WOULD render (infra/kubernetes/serving.py builds them without pulumi), and
yields one FitProblem per violation, with the fix in the same line. The figures come from data rows
with their sources: node allocatable (sizing/planning/allocatable.py: node_allocatable.csv, node_daemonsets.csv),
checkpoint sizes (sizing/perf/checkpoint.py: checkpoints.csv), EKS-disallowed AZ IDs
(infra/data/eks_disallowed_az_ids.csv), LWS placement (kubernetes-sigs/lws).

Rules: api-key-empty, engine-not-deployable, gated-checkpoint-without-token, served-model-mismatch,
requests-exceed-allocatable, gpus-exceed-node,
storage-below-checkpoint, cluster-subnet-disallowed-az, lws-exclusive-topology, pdb-exceeds-runnable,
node-group-max-below-surge, max-num-seqs-below-concurrency, capacity-below-demand.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.config.az_choice import (
    EKS_MIN_CLUSTER_AZS,
    choose_az_ids,
    cluster_az_ids,
    disallowed_source,
    eks_disallowed_az_ids,
)
from infra.config.names import NAMESPACE, SERVING_SERVICE_ACCOUNT, served_checkpoints, weights_prefix
from infra.config.platform import load_platform
from infra.fit.check import FitContext, FitProblem, fit_row, fit_rule
from infra.kubernetes import efa_plugin
from infra.kubernetes.k8s_common import cache_size_limit
from infra.kubernetes.serving import (
    ServingContext,
    disruption_budget,
    gpus_per_pod,
    model_path_of,
    rolling_update,
    workload,
)
from infra.kubernetes.serving_context import serving_context
from infra.kubernetes.weights import MODEL_DIR, WeightsLocation
from sizing.catalog.platform import number
from sizing.errors import SpecError
from sizing.planning.allocatable import NodeAllocatable, node_allocatable
from sizing.planning.node_storage import ephemeral_on_nvme, nvme_gib, usable_ephemeral_gib

if TYPE_CHECKING:
    from sizing.plan import Pool

SRC_NODEADM = ("awslabs/amazon-eks-ami nodeadm kubelet config + EKS managed node groups "
               "(sizing/data/node_allocatable.csv)")
SRC_LWS = "kubernetes-sigs/lws pkg/webhooks/pod_webhook.go SetExclusiveAffinities @060ab4da"
SRC_PDB = "Kubernetes PodDisruptionBudget: an eviction is refused while fewer than minAvailable pods would remain"
SRC_VLLM_KEY = ("vLLM 0.33.0 vllm/entrypoints/serve/middleware/register.py: an empty key is dropped and "
                "no AuthenticationMiddleware is added")
SRC_SGLANG_KEY = ("sglang 0.5.23 sglang/srt/entrypoints/http_server.py: the API-key middleware is added only "
                  "`if get_serving().api_key or ...`, so an empty --api-key serves every route")
SRC_EMPTYDIR = "Kubernetes emptyDir sizeLimit: the kubelet evicts a pod whose emptyDir exceeds it"
SRC_PLAN = "llmcap plan consistency (issue 18 item 7)"
BUCKET_PLACEHOLDER = "weights-bucket"


# --- what the program would render, per pool -------------------------------------------------

@dataclass(frozen=True)
class PoolView:
    pool: Pool
    node: NodeAllocatable
    mode: str  # nvme | s3-stream
    on_nvme: bool  # the kubelet's filesystem (emptyDirs, containerd) is the instance store
    workload: dict[str, Any]
    pods: list[tuple[str, dict[str, Any]]]  # (role, pod spec)
    pods_per_node: int
    hosts_copy_job: bool


def _ctx(fit: FitContext, pool: Pool) -> ServingContext:
    d = fit.stack.deployment
    return serving_context(pool, NAMESPACE, SERVING_SERVICE_ACCOUNT, fit.plan.region,
                           WeightsLocation(BUCKET_PLACEHOLDER, weights_prefix(pool.vllm.model)),
                           d.model_cache_on_instance_store)


def pool_views(fit: FitContext) -> list[PoolView]:
    cached = fit.extra.get("_pool_views")
    if cached is not None:
        return cached
    views = []
    hosts = {ckpt: next(p.name for p in fit.plan.pools if p.vllm.model == ckpt)
             for ckpt in served_checkpoints(fit.plan.pools)}
    from infra.kubernetes.engines import ENGINES

    for pool in fit.plan.pools:
        if pool.engine not in ENGINES:
            continue  # engine-not-deployable says so; there is no pod to check
        ctx = _ctx(fit, pool)
        w = workload(pool, ctx)
        if w["kind"] == "Deployment":
            pods = [("pod", w["spec"]["template"]["spec"])]
        else:
            t = w["spec"]["leaderWorkerTemplate"]
            pods = [("leader", t["leaderTemplate"]["spec"]), ("worker", t["workerTemplate"]["spec"])]
        inst = fit.catalog.instances.get(pool.instance_type)
        if inst is None:
            raise ValueError(f"pool {pool.name}: instance type {pool.instance_type} is not in the catalog")
        views.append(PoolView(
            # the EFA device plugin's DaemonSet runs on every node of the types it selects (efa_plugin.py)
            pool=pool, node=node_allocatable(fit.catalog, inst,
                                             efa=pool.instance_type in efa_plugin.plugin_instance_types(fit.plan)),
            mode=ctx.weights_mode,
            on_nvme=ephemeral_on_nvme(pool.local_nvme_gb, fit.stack.deployment.model_cache_on_instance_store),
            workload=w, pods=pods,
            pods_per_node=pool.replicas_per_instance if pool.nodes_per_replica == 1 else 1,
            hosts_copy_job=hosts[pool.vllm.model] == pool.name))
    fit.extra["_pool_views"] = views
    return views


def _cpu_m(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(round(float(q) * 1000))


def _mem_mib(q: str) -> int:
    for suffix, f in (("Ki", 1 / 1024), ("Mi", 1), ("Gi", 1024), ("Ti", 1024 * 1024)):
        if q.endswith(suffix):
            return int(math.ceil(float(q[: -len(suffix)]) * f))
    return int(math.ceil(float(q) / 2**20))


def effective_requests(pod: dict[str, Any]) -> tuple[int, int]:
    """(CPU millicores, memory MiB) the scheduler reserves for a pod: per resource, the larger of
    the largest init container and the sum of the containers (Kubernetes "effective request")."""
    def req(c: dict[str, Any]) -> tuple[int, int]:
        r = (c.get("resources") or {}).get("requests") or {}
        return _cpu_m(str(r.get("cpu", "0m"))), _mem_mib(str(r.get("memory", "0Mi")))
    cs = [req(c) for c in pod.get("containers", [])]
    inits = [req(c) for c in pod.get("initContainers", [])]
    return (max([sum(c[0] for c in cs)] + [i[0] for i in inits]),
            max([sum(c[1] for c in cs)] + [i[1] for i in inits]))


def _limit_gib(q: str) -> float:
    return _mem_mib(q) / 1024


def _models_volume_gib(pod: dict[str, Any]) -> float | None:
    for v in pod.get("volumes", []):
        if v.get("name") == "models" and "emptyDir" in v:
            return _limit_gib(str(v["emptyDir"].get("sizeLimit", "0Mi")))
    return None


def _runnable_pods(p: Pool) -> int:
    """Serving pods the node group can run at its max size."""
    if p.nodes_per_replica > 1:
        return min(p.instances_max // p.nodes_per_replica, p.replicas) * p.nodes_per_replica
    return min(p.instances_max * p.replicas_per_instance, p.replicas)


def _surge_nodes(p: Pool) -> int:
    """Nodes a rolling update needs: every planned replica plus its surge replicas (infra/kubernetes/serving.py
    rolling_update: maxSurge 1, or 0 on a reservation)."""
    surge = rolling_update(p)["maxSurge"]
    if p.nodes_per_replica > 1:
        return (p.replicas + surge) * p.nodes_per_replica
    return math.ceil((p.replicas + surge) / max(p.replicas_per_instance, 1))


def _ephemeral_gib(v: PoolView) -> tuple[str, float]:
    """Where emptyDirs and images land on a node, and its usable GiB below the eviction threshold."""
    if v.on_nvme:
        return "instance-store NVMe", usable_ephemeral_gib(nvme_gib(v.pool.local_nvme_gb))
    return "root EBS", usable_ephemeral_gib(float(v.pool.root_volume_gib))


def _subnet_azs(fit: FitContext) -> tuple[list[str], dict[str, tuple[str, ...]]] | str | None:
    """The subnet AZ IDs the program would create and the AZs offering each type; a string when
    none can be chosen (why); None for a VPC you bring (its subnets' AZs are not known before the run)."""
    if fit.stack.deployment.vpc_id:
        return None
    plan, cat = fit.plan, fit.catalog
    offered = {p.instance_type: cat.offered_azs(p.instance_type, plan.region) for p in plan.pools}
    region_az_ids = sorted({az for (_, region), azs in cat.offerings.items() if region == plan.region for az in azs})
    try:
        return choose_az_ids(plan, offered, region_az_ids, load_platform(fit.stack.deployment).max_azs), offered
    except SpecError as e:
        return str(e)


# --- rules -----------------------------------------------------------------------------------

@fit_rule("api-key-empty")
def api_key_empty(fit: FitContext) -> Iterator[FitProblem]:
    if fit.api_key is not None and not fit.api_key.strip():
        engines = sorted({p.engine for p in fit.plan.pools})
        who = " and ".join({"vllm": "vLLM", "sglang": "SGLang"}.get(e, e) for e in engines)
        src = SRC_VLLM_KEY if engines == ["vllm"] else f"{SRC_VLLM_KEY}; {SRC_SGLANG_KEY}"
        yield FitProblem("api-key-empty", "llmcap:api_key",
                         f"is empty, and {who} serves every route unauthenticated with an empty key; set one with "
                         "`pulumi config set --secret llmcap:api_key \"$(openssl rand -hex 32)\"`", src)


@fit_rule("gated-checkpoint-without-token")
def gated_checkpoint_without_token(fit: FitContext) -> Iterator[FitProblem]:
    """A gated Hub repository (checkpoints.csv `gated`) downloads only with a token: without one the copy Job
    fails after every GPU node is up. Applies where the caller knows whether llmcap:hf_token is set
    (`extra["hf_token_set"]`: a real preview/up, or a render told so)."""
    if fit.extra.get("hf_token_set", True):
        return
    for ckpt in dict.fromkeys(p.vllm.model for p in fit.plan.pools):
        facts = fit.catalog.checkpoints.get(ckpt)
        if facts is not None and facts.gated:
            yield FitProblem("gated-checkpoint-without-token", "llmcap:hf_token",
                             f"{ckpt} is a gated Hugging Face repository and no token is set; accept its license on "
                             "huggingface.co, then `pulumi config set --secret llmcap:hf_token hf_...`",
                             "sizing/data/checkpoints.csv gated")


@fit_rule("served-model-mismatch")
def served_model_mismatch(fit: FitContext) -> Iterator[FitProblem]:
    for v in pool_views(fit):
        p = v.pool
        fmt = fit.catalog.precision(p.precision)
        if fmt.needs_prequantized_checkpoint and p.vllm.model == fit.plan.model:
            yield FitProblem("served-model-mismatch", p.name,
                             f"{p.precision} needs a pre-quantized checkpoint but the pool would serve the base model "
                             f"{p.vllm.model} (vLLM fails to load it with --quantization {p.vllm.quantization}); add "
                             f"llmcap:workload.checkpoints.{p.precision}: <org/model>", "precisions.csv")
        prefix = weights_prefix(p.vllm.model).strip("/")
        for role, pod in v.pods:
            args = pod["containers"][0]["args"]
            sync = [c for c in pod.get("initContainers", []) if c.get("name") == "weights-sync"]
            path = model_path_of(p, args)
            reads = " ".join(sync[0]["command"]) if sync and path == MODEL_DIR else path
            if prefix not in reads:
                yield FitProblem("served-model-mismatch", p.name,
                                 f"{role} pod loads {reads!r}, not the pool's checkpoint {p.vllm.model}; the copy Job, "
                                 "the S3 prefix and the engine's command must use pool.vllm.model", "issue 14 defect 1")


@fit_rule("requests-exceed-allocatable")
def requests_exceed_allocatable(fit: FitContext) -> Iterator[FitProblem]:
    for v in pool_views(fit):
        n = v.node
        for role, pod in v.pods:
            cpu, mem = effective_requests(pod)
            k = v.pods_per_node
            if cpu <= 0 or mem <= 0:
                yield FitProblem("requests-exceed-allocatable", v.pool.name,
                                 f"{v.pool.instance_type} leaves nothing for the serving pods after kube-reserved, "
                                 "eviction and DaemonSets; choose a larger instance type", SRC_NODEADM)
            elif cpu * k > n.for_pods_cpu_millicores or mem * k > n.for_pods_memory_mib:
                who = "" if role == "pod" else f"{role} "
                yield FitProblem("requests-exceed-allocatable", v.pool.name,
                                 f"{k} {who}pod(s) request {cpu * k}m CPU / {mem * k}Mi but a {v.pool.instance_type} "
                                 f"node has {n.for_pods_cpu_millicores}m / {n.for_pods_memory_mib}Mi for pods "
                                 "(allocatable less DaemonSets); choose a larger instance type or fewer replicas "
                                 "per node", SRC_NODEADM)


@fit_rule("gpus-exceed-node")
def gpus_exceed_node(fit: FitContext) -> Iterator[FitProblem]:
    for v in pool_views(fit):
        p = v.pool
        need = gpus_per_pod(p) * v.pods_per_node
        if need > p.gpus_per_instance:
            yield FitProblem("gpus-exceed-node", p.name,
                             f"{v.pods_per_node} pod(s) × {gpus_per_pod(p)} GPUs need {need} GPUs but a "
                             f"{p.instance_type} has {p.gpus_per_instance}; choose fewer replicas per node",
                             "instances.csv gpu_count")


@fit_rule("storage-below-checkpoint")
def storage_below_checkpoint(fit: FitContext) -> Iterator[FitProblem]:
    image = number("vllm_image_gib")
    for v in pool_views(fit):
        p = v.pool
        limit = math.ceil(p.model_cache_gib_per_node)
        where, usable = _ephemeral_gib(v)
        if limit < p.checkpoint_gib:
            yield FitProblem("storage-below-checkpoint", p.name,
                             f"the model cache ({limit}Gi) is smaller than the {p.checkpoint_gib:.1f} GiB checkpoint "
                             f"{p.vllm.model}; size it from the checkpoint (sizing/perf/checkpoint.py)", SRC_EMPTYDIR)
        for role, pod in v.pods:
            vol = _models_volume_gib(pod)
            if vol is not None and vol < p.checkpoint_gib:
                yield FitProblem("storage-below-checkpoint", p.name,
                                 f"{role} pod's model emptyDir ({vol:.0f}Gi) is smaller than the "
                                 f"{p.checkpoint_gib:.1f} GiB checkpoint it syncs", SRC_EMPTYDIR)
        # the node's kubelet filesystem holds the image and, with a local copy or the copy Job, one model
        local_copy = v.mode == "nvme" or v.hosts_copy_job
        need = image + (limit if local_copy else 0.0)
        if need > usable:
            what = "the copy Job's scratch copy" if v.mode != "nvme" else "the model cache"
            fix = ("choose an instance type with more instance store, or set "
                   "llmcap:deployment.model_cache_on_instance_store=false to use a root volume sized for it"
                   if v.on_nvme else f"the plan's root_volume_gib ({p.root_volume_gib}) is too small: re-plan")
            yield FitProblem("storage-below-checkpoint", p.name,
                             f"{where} of a {p.instance_type} holds {usable:.0f} GiB below the kubelet's eviction "
                             f"threshold but needs {need:.0f} GiB (image + {what}); {fix}", SRC_EMPTYDIR)


@fit_rule("cluster-subnet-disallowed-az")
def cluster_subnet_disallowed_az(fit: FitContext) -> Iterator[FitProblem]:
    got = _subnet_azs(fit)
    if got is None:
        return
    if isinstance(got, str):
        yield FitProblem("cluster-subnet-disallowed-az", "cluster", got, disallowed_source())
        return
    az_ids, offered = got
    bad = eks_disallowed_az_ids(fit.plan.region)
    cluster = cluster_az_ids(fit.plan.region, az_ids)
    if len(cluster) < EKS_MIN_CLUSTER_AZS or set(cluster) & bad:
        yield FitProblem("cluster-subnet-disallowed-az", "cluster",
                         f"cluster subnets would be in {cluster} (EKS disallows {sorted(bad)} and needs two AZs); "
                         "choose another region", disallowed_source())
    for p in fit.plan.pools:
        if not set(az_ids) & set(offered[p.instance_type]):
            yield FitProblem("cluster-subnet-disallowed-az", p.name,
                             f"no subnet AZ offers {p.instance_type}; choose another instance type or region",
                             "offerings.csv")


@fit_rule("lws-exclusive-topology")
def lws_exclusive_topology(fit: FitContext) -> Iterator[FitProblem]:
    for v in pool_views(fit):
        ann = v.workload["metadata"].get("annotations") or {}
        keys = [k for k in ann if k.endswith("exclusive-topology")]
        if keys:
            yield FitProblem("lws-exclusive-topology", v.pool.name,
                             f"{keys[0]}={ann[keys[0]]} allows one group per topology domain (a required "
                             "anti-affinity); remove it and keep groups close with a preferred affinity", SRC_LWS)


@fit_rule("pdb-exceeds-runnable")
def pdb_exceeds_runnable(fit: FitContext) -> Iterator[FitProblem]:
    for v in pool_views(fit):
        p = v.pool
        min_available = int(disruption_budget(p, NAMESPACE)["spec"]["minAvailable"])
        runnable = _runnable_pods(p)
        if min_available > runnable:
            yield FitProblem("pdb-exceeds-runnable", p.name,
                             f"PodDisruptionBudget minAvailable {min_available} > {runnable} pods the node group "
                             f"can run (max {p.instances_max} nodes): every drain would be blocked; raise the "
                             "node group's max or lower the redundancy", SRC_PDB)


@fit_rule("node-group-max-below-surge")
def node_group_max_below_surge(fit: FitContext) -> Iterator[FitProblem]:
    for v in pool_views(fit):
        p = v.pool
        need = _surge_nodes(p)
        if p.instances_max < need:
            yield FitProblem("node-group-max-below-surge", p.name,
                             f"node group max {p.instances_max} < {need} nodes for {p.replicas} replicas plus the "
                             f"rolling update's surge replicas (maxSurge {rolling_update(p)['maxSurge']}); raise "
                             "llmcap:hardware.autoscaling_headroom",
                             "infra/kubernetes/serving.py rollingUpdate maxSurge 1")


@fit_rule("node-group-above-quota")
def node_group_above_quota(fit: FitContext) -> Iterator[FitProblem]:
    quota = int(number("eks_max_nodes_per_managed_node_group"))
    for p in fit.plan.pools:
        if p.instances_max > quota:
            yield FitProblem("node-group-above-quota", p.name,
                             f"node group max {p.instances_max} exceeds the EKS quota of {quota} nodes per managed "
                             "node group; request an increase of quota L-BD136A63 (Service Quotas), then raise "
                             "eks_max_nodes_per_managed_node_group in sizing/data/platform.csv, or lower the traffic",
                             "EKS service quota L-BD136A63 (sizing/data/platform.csv)")


@fit_rule("max-num-seqs-below-concurrency")
def max_num_seqs_below_concurrency(fit: FitContext) -> Iterator[FitProblem]:
    for p in fit.plan.pools:
        need = math.ceil(p.per_replica.planned_concurrency - 1e-9)
        if p.vllm.max_num_seqs < need:
            yield FitProblem("max-num-seqs-below-concurrency", p.name,
                             f"--max-num-seqs {p.vllm.max_num_seqs} admits fewer sequences than the {need} the plan "
                             "puts on each replica; the planner must size the KV cache for the planned load",
                             SRC_PLAN)


# vLLM 0.33.0, vllm/config/scheduler.py SchedulerConfig.verify_max_model_len: "max_num_batched_tokens
# ({...}) must be greater than or equal to max_num_seqs ({...})" (ValueError at engine start), and with
# chunked prefill off "max_num_batched_tokens ... is smaller than max_model_len" (llmcap never turns it off:
# enable_chunked_prefill defaults to True there).
SRC_VLLM_SCHEDULER = "vllm 0.33.0 wheel, vllm/config/scheduler.py SchedulerConfig.verify_max_model_len"


@fit_rule("vllm-flags-rejected")
def vllm_flags_rejected(fit: FitContext) -> Iterator[FitProblem]:
    for p in fit.plan.pools:
        if p.engine != "vllm":
            continue  # SGLang takes --chunked-prefill-size below --max-running-requests
        v = p.vllm
        if v.max_num_batched_tokens < v.max_num_seqs:
            yield FitProblem("vllm-flags-rejected", p.name,
                             f"--max-num-batched-tokens {v.max_num_batched_tokens:,} is below --max-num-seqs "
                             f"{v.max_num_seqs:,}, which vLLM refuses at start; re-plan (llmcap plan --write)",
                             SRC_VLLM_SCHEDULER)


@fit_rule("engine-not-deployable")
def engine_not_deployable(fit: FitContext) -> Iterator[FitProblem]:
    """The planner models TensorRT-LLM's performance, but llmcap deploys only vLLM and SGLang pools."""
    from infra.kubernetes.engines import ENGINES

    for p in fit.plan.pools:
        if p.engine not in ENGINES:
            yield FitProblem("engine-not-deployable", p.name,
                             f"the plan runs {p.engine}, which llmcap plans but does not deploy; set "
                             f"llmcap:workload.engine to {' or '.join(ENGINES)} (or a list of them) and re-plan",
                             "infra/kubernetes/engines.py ENGINES")


@fit_rule("capacity-below-demand")
def capacity_below_demand(fit: FitContext) -> Iterator[FitProblem]:
    t = fit.plan.totals
    # 0.5 token/s: the plan rounds both figures to 2 decimals
    if t.capacity_output_tokens_per_s + 0.5 < t.demand_output_tokens_per_s:
        yield FitProblem("capacity-below-demand", "plan",
                         f"capacity {t.capacity_output_tokens_per_s:,.1f} output tokens/s is below the demand "
                         f"{t.demand_output_tokens_per_s:,.1f}; re-plan (llmcap plan)", SRC_PLAN)


# --- the table ---------------------------------------------------------------------------------

@fit_row
def _rows(fit: FitContext) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    got = _subnet_azs(fit)
    subnet_azs, offered = got if isinstance(got, tuple) else ([], {})
    cluster = cluster_az_ids(fit.plan.region, subnet_azs) if subnet_azs else []
    for v in pool_views(fit):
        p = v.pool
        cpu, mem = max(effective_requests(pod) for _, pod in v.pods)
        where, usable = _ephemeral_gib(v)
        k = v.pods_per_node
        azs = ([az for az in subnet_azs if az in offered.get(p.instance_type, ())] if subnet_azs
               else ["(your VPC)"] if got is None else ["none"])
        out[p.name] = {
            "instance": p.instance_type,
            "CPU req/alloc (m)": f"{cpu * k:,}/{v.node.for_pods_cpu_millicores:,}",
            "mem req/alloc (Mi)": f"{mem * k:,}/{v.node.for_pods_memory_mib:,}",
            # kept out of "alloc" for DaemonSets added after the deploy (sizing/planning/allocatable.py)
            "later DS reserve (m/Mi)": f"{v.node.reserve_cpu_millicores:,}/{v.node.reserve_memory_mib:,}",
            "GPUs req/node": f"{gpus_per_pod(p) * k}/{p.gpus_per_instance}",
            "cache/ckpt (GiB)": f"{cache_size_limit(p)[:-2]}/{p.checkpoint_gib:.1f}",
            "disk (GiB)": f"{where} {usable:,.0f}",
            "load": v.mode,
            "pods plan/runnable": f"{p.replicas * p.nodes_per_replica}/{_runnable_pods(p)}",
            "PDB min": int(disruption_budget(p, NAMESPACE)["spec"]["minAvailable"]),
            "nodes min/max (surge)": f"{p.instances_min}/{p.instances_max} ({_surge_nodes(p)})",
            "AZs (cluster)": f"{','.join(azs)} ({','.join(cluster) or '-'})",
        }
    return out
