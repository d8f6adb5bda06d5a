"""Serving objects per plan pool (vLLM or SGLang, infra/kubernetes/engines.py): a Deployment (single-node replicas)
or a LeaderWorkerSet (multi-node replicas), and a PodDisruptionBudget. Every figure comes from the Plan; policy
constants from infra/data/serving.yaml. No pulumi import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infra.config import settings
from infra.config.efa_cards import EFA_RESOURCE, efa_per_pod
from infra.config.names import GPU_TAINT_KEY, GPU_TAINT_VALUE, POOL_LABEL
from infra.config.registry import ImageRefs
from infra.kubernetes import sglang_args, vllm_args
from infra.kubernetes.engines import SGLANG, engine_of, image_of
from infra.kubernetes.k8s_common import (
    API_KEY_SECRET,
    API_KEY_SECRET_KEY,
    ENDPOINT_LABEL,
    cache_size_limit,
    container_security_context,
    meta,
    pod_security_context,
    secret_env,
    serving_labels,
    serving_name,
)
from infra.kubernetes.nccl_env import nccl_efa_env
from infra.kubernetes.vllm_args import ModelSource, MultiNode

if TYPE_CHECKING:
    from sizing.plan import Pool

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
HOME = "/home/vllm"


@dataclass(frozen=True)
class ServingContext:
    """What a pool's serving objects need beside the Pool, resolved by the caller (the ServingPool
    component, the fit checks): how its nodes load the weights (sizing.planning.node_storage.loading_mode),
    from where (infra/kubernetes/weights.py), and how long a new node takes before vLLM runs
    (sizing.perf.cold_start)."""

    namespace: str
    service_account: str
    region: str
    weights_mode: str  # nvme | s3-stream
    model_source: ModelSource
    weights_sync: dict[str, Any] | None  # the init container copying the checkpoint onto the NVMe (nvme mode)
    before_engine_s: float  # node boot, image pull (and the S3 sync) before the vLLM container starts, s
    # where the images come from (the pull-through cache or the user's registry; infra/config/registry.py)
    images: ImageRefs = field(default_factory=ImageRefs.upstream)
    # on every serving pod; Karpenter's `karpenter.sh/do-not-disrupt` (infra/karpenter/nodes.py) with that provisioner
    pod_annotations: dict[str, str] = field(default_factory=dict)


def serve_args(pool: Pool, source: ModelSource, port: int, multi_node: MultiNode | None = None) -> list[str]:
    """The pool's engine's arguments after its command, checked against the pinned release's parser."""
    if engine_of(pool) is SGLANG:
        return sglang_args.serve_args(pool, source, port, multi_node)
    return vllm_args.serve_args(pool, source, port, multi_node)


def model_path_of(pool: Pool, args: list[str]) -> str:
    """The weights path a rendered command line loads: vLLM's positional model, SGLang's --model-path."""
    if engine_of(pool) is SGLANG:
        return args[args.index("--model-path") + 1]
    return args[0]


def gpus_per_pod(pool: Pool) -> int:
    """GPUs one pod requests: the replica's tp × pp GPUs, split over its nodes when multi-node."""
    total = pool.tensor_parallel * pool.pipeline_parallel
    if total % pool.nodes_per_replica:
        raise ValueError(f"pool {pool.name}: tp {pool.tensor_parallel} × pp {pool.pipeline_parallel} GPUs do not "
                         f"split evenly over {pool.nodes_per_replica} nodes")
    return total // pool.nodes_per_replica


def startup_budget_s(pool: Pool) -> int:
    """How long the startup probe lets vLLM come up: the plan's expected weight-load time plus the
    engine's start-up margin, times a safety factor (infra/data/serving.yaml)."""
    s = settings.policy().startup
    return math.ceil((pool.per_replica.weights_load_s + s.margin_s) * s.safety_factor)


def rollout_budget_s(pool: Pool, before_engine_s: float) -> int:
    """How long a new pod may take to become ready on a new node (s): what runs before vLLM
    (`before_engine_s`, sizing.perf.cold_start.before_engine_s), then the startup probe's budget."""
    return math.ceil(before_engine_s) + startup_budget_s(pool)


def rollout_timeout_s(pool: Pool, before_engine_s: float) -> int:
    """How long Pulumi waits for a pool's workload to roll out (s): the rollout budget plus a margin
    (infra/data/serving.yaml `rollout.margin_s`)."""
    return rollout_budget_s(pool, before_engine_s) + settings.policy().rollout.margin_s


def probes(port_name: str, pool: Pool) -> dict[str, Any]:
    s = settings.policy()
    period = s.startup.period_s
    get = {"path": "/health", "port": port_name}
    return {
        "startupProbe": {"httpGet": get, "periodSeconds": period, "timeoutSeconds": s.startup.timeout_s,
                         "failureThreshold": math.ceil(startup_budget_s(pool) / period)},
        "readinessProbe": {"httpGet": get, "periodSeconds": s.readiness.period_s,
                           "timeoutSeconds": s.readiness.timeout_s,
                           "failureThreshold": s.readiness.failure_threshold},
        "livenessProbe": {"httpGet": get, "periodSeconds": s.liveness.period_s,
                          "timeoutSeconds": s.liveness.timeout_s,
                          "failureThreshold": s.liveness.failure_threshold},
    }


# LWS puts this label (a hash unique to one group) on every pod of a group
# (kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go GroupUniqueHashLabelKey)
LWS_GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"


def worker_leader_zone_affinity(labels: dict[str, str]) -> dict[str, Any]:
    """A worker PREFERS the zone of its own group's pods (the leader is created first, startupPolicy
    LeaderCreated), so NCCL traffic stays zonal when capacity allows. Not LWS's
    `exclusive-topology` annotation: that adds a REQUIRED pod affinity plus a REQUIRED anti-affinity
    against every other group ("Pod anti-affinity ensures exclusively this set lands on the topology,
    preventing multiple sets per topology domain", kubernetes-sigs/lws pkg/webhooks/pod_webhook.go
    SetExclusiveAffinities @060ab4da), i.e. at most one group per zone. `matchLabelKeys` narrows the
    selector to the incoming pod's own group-key value (Kubernetes pod affinity matchLabelKeys, 1.33+)."""
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100,  # the strongest preference the API takes (weight 1-100)
        "podAffinityTerm": {"labelSelector": {"matchLabels": dict(labels)}, "matchLabelKeys": [LWS_GROUP_KEY_LABEL],
                            "topologyKey": "topology.kubernetes.io/zone"}}]}


def worker_probes(pool: Pool) -> dict[str, Any]:
    """A headless worker serves no HTTP; it is alive while its group's leader answers /health (the
    leader's engine stalls when a worker hangs). A failed probe restarts the worker, and
    RecreateGroupOnPodRestart recreates the whole group. The startup probe gives the group the
    leader's startup budget first."""
    s = settings.policy()
    period = s.startup.period_s
    w = s.worker_probe
    check = {"exec": {"command": ["python3", "-c", (
        "import os, urllib.request; urllib.request.urlopen("
        f"'http://' + os.environ['LWS_LEADER_ADDRESS'] + ':{s.vllm_port}/health', timeout={w.http_timeout_s})")]}}
    return {
        "startupProbe": {**check, "periodSeconds": period, "timeoutSeconds": w.timeout_s,
                         "failureThreshold": math.ceil(startup_budget_s(pool) / period)},
        "livenessProbe": {**check, "periodSeconds": s.liveness.period_s, "timeoutSeconds": w.timeout_s,
                          "failureThreshold": s.liveness.failure_threshold},
    }


def _scheduling(pool: Pool, labels: dict[str, str]) -> dict[str, Any]:
    selector = {"matchLabels": dict(labels)}
    return {
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Equal", "value": GPU_TAINT_VALUE,
                         "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": [pool.name]}]}]}}},
        # soft: several replicas share one multi-GPU node by design (replicas_per_instance), and a pool's
        # instance type may be offered in one AZ only; the scheduler still spreads where it can
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": selector},
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": selector},
        ],
    }


def _pod_spec(pool: Pool, ctx: ServingContext, args: list[str], serves_http: bool,
              labels: dict[str, str]) -> dict[str, Any]:
    s = settings.policy()
    port = s.vllm_port
    gpus = str(gpus_per_pod(pool))
    mode = ctx.weights_mode
    engine = engine_of(pool)
    # a pool on EFA: every EFA interface of the node (one pod per node), which the EFA device plugin advertises
    # (infra/kubernetes/efa_plugin.py); requests equal limits, as for any extended resource
    n_efa = efa_per_pod(pool)
    efa = {EFA_RESOURCE: str(n_efa)} if n_efa else {}
    env = [
        secret_env(engine.api_key_env, API_KEY_SECRET, API_KEY_SECRET_KEY),
        {"name": "HOME", "value": HOME},
        # the non-root UID has no passwd entry; torch's cache paths call getpass.getuser(), which reads USER first
        {"name": "USER", "value": "vllm"},
        {"name": "AWS_REGION", "value": ctx.region},
        {"name": "HF_HUB_OFFLINE", "value": "1"},  # weights come from our bucket, never the hub
        *({"name": k, "value": v} for k, v in engine.telemetry_env),
        *nccl_efa_env(pool),  # NCCL over aws-ofi-nccl on a pool on EFA (infra/kubernetes/nccl_env.py)
    ]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "home", "mountPath": HOME}]
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": s.shm.size_limit}},
        {"name": "home", "emptyDir": {"sizeLimit": s.home.size_limit}},  # torch.compile, Triton and FlashInfer caches
    ]
    container: dict[str, Any] = {
        "name": engine.name,
        "image": image_of(pool, ctx.images),
        "command": list(engine.command),
        "args": args,
        "env": env,
        # CPU and memory are the node's allocatable share per replica, as the plan sized them
        "resources": {"requests": {"cpu": f"{pool.cpu_millicores_per_replica}m",
                                   "memory": f"{pool.memory_mib_per_replica}Mi", "nvidia.com/gpu": gpus, **efa},
                      "limits": {"nvidia.com/gpu": gpus, **efa}},
        # vLLM writes JIT kernels and compile caches at run time in places beyond HOME, so the root
        # filesystem stays writable; everything else of the restricted profile applies
        "securityContext": container_security_context(read_only_root=False),
        "volumeMounts": mounts,
    }
    if serves_http:
        container["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
        container.update(probes("http", pool))
    else:  # an LWS worker
        container.update(worker_probes(pool))
    pod: dict[str, Any] = {
        "serviceAccountName": ctx.service_account,
        "automountServiceAccountToken": False,  # vLLM never calls the Kubernetes API
        "securityContext": pod_security_context(),
        "terminationGracePeriodSeconds": s.pod.termination_grace_period_s,
        **_scheduling(pool, labels),
        "containers": [container],
        "volumes": volumes,
    }
    if not serves_http:
        pod["affinity"]["podAffinity"] = worker_leader_zone_affinity(labels)
    if mode == "nvme":
        volumes.append({"name": "models", "emptyDir": {"sizeLimit": cache_size_limit(pool)}})
        mounts.append({"name": "models", "mountPath": "/models", "readOnly": True})
        volumes.append({"name": "tmp", "emptyDir": {"sizeLimit": s.scratch.size_limit}})  # the sync container's /tmp
        if ctx.weights_sync is None:
            raise ValueError(f"pool {pool.name}: nvme weights mode without the sync init container")
        pod["initContainers"] = [ctx.weights_sync]
    return pod


def source_for(pool: Pool, ctx: ServingContext) -> ModelSource:
    return ctx.model_source


def rolling_update(pool: Pool) -> dict[str, int]:
    """maxSurge 1 / maxUnavailable 0: capacity never drops below the planned replicas. A pool on a
    reservation or Capacity Block has no node for a surge replica (the reservation holds a fixed count),
    so it replaces one replica at a time (maxSurge 0, maxUnavailable 1); its spare replica covers that."""
    if pool.capacity_reservation_id:
        return {"maxUnavailable": 1, "maxSurge": 0}
    return {"maxUnavailable": 0, "maxSurge": 1}


def _pod_meta(labels: dict[str, str], ctx: ServingContext) -> dict[str, Any]:
    return {"labels": labels, **({"annotations": dict(ctx.pod_annotations)} if ctx.pod_annotations else {})}


def deployment(pool: Pool, ctx: ServingContext) -> dict[str, Any]:
    """Single-node replicas. Rolling updates add one replica before removing one (maxSurge 1,
    maxUnavailable 0), so serving capacity never drops below the planned replicas."""
    name = serving_name(pool.name)
    labels = serving_labels(pool.name)
    pod_labels = {**labels, ENDPOINT_LABEL: "true"}
    port = settings.policy().vllm_port
    args = serve_args(pool, source_for(pool, ctx), port)
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": meta(name, ctx.namespace, labels),
        "spec": {
            "replicas": pool.replicas,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": rolling_update(pool)},
            "template": {"metadata": _pod_meta(pod_labels, ctx),
                         "spec": _pod_spec(pool, ctx, args, serves_http=True, labels=labels)},
        },
    }


def leader_worker_set(pool: Pool, ctx: ServingContext) -> dict[str, Any]:
    """Multi-node replicas: one LWS group per replica, `size` = nodes per replica; vLLM's native
    multi-node mode (multiprocessing backend) with the leader as rank 0 serving HTTP and the
    workers headless. LWS injects LWS_LEADER_ADDRESS and LWS_WORKER_INDEX into every pod."""
    name = serving_name(pool.name)
    labels = serving_labels(pool.name)
    port = settings.policy().vllm_port
    src = source_for(pool, ctx)
    n = pool.nodes_per_replica
    leader_args = serve_args(pool, src, port, MultiNode(n, "0", "$(LWS_LEADER_ADDRESS)", headless=False))
    worker_args = serve_args(pool, src, port, MultiNode(n, "$(LWS_WORKER_INDEX)", "$(LWS_LEADER_ADDRESS)",
                                                         headless=True))
    return {
        "apiVersion": LWS_API_VERSION, "kind": "LeaderWorkerSet",
        # no exclusive-topology annotation (one group per zone); workers prefer their leader's zone
        "metadata": meta(name, ctx.namespace, labels),
        "spec": {
            "replicas": pool.replicas,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {"type": "RollingUpdate",
                                "rollingUpdateConfiguration": rolling_update(pool)},
            "leaderWorkerTemplate": {
                "size": n,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {"metadata": _pod_meta({**labels, ENDPOINT_LABEL: "true"}, ctx),
                                   "spec": _pod_spec(pool, ctx, leader_args, serves_http=True, labels=labels)},
                "workerTemplate": {"metadata": _pod_meta(dict(labels), ctx),
                                   "spec": _pod_spec(pool, ctx, worker_args, serves_http=False, labels=labels)},
            },
        },
    }


def workload(pool: Pool, ctx: ServingContext) -> dict[str, Any]:
    return leader_worker_set(pool, ctx) if pool.nodes_per_replica > 1 else deployment(pool, ctx)


def disruption_budget(pool: Pool, namespace: str) -> dict[str, Any]:
    """Voluntary evictions (node drains, upgrades) may take only the redundancy replicas: the
    replicas the demand needs stay up. Multi-node replicas count every pod of a group."""
    labels = serving_labels(pool.name)
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": meta(serving_name(pool.name), namespace, labels),
        "spec": {"minAvailable": pool.replicas_for_demand * pool.nodes_per_replica,
                 "selector": {"matchLabels": labels}},
    }
