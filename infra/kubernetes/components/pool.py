"""One serving pool: its vLLM Deployment (one node per replica) or LeaderWorkerSet (several), its
PodDisruptionBudget and its KEDA ScaledObject, as infra/kubernetes/serving.py and infra/kubernetes/autoscaling.py
build them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s

from infra.config.registry import ImageRefs
from infra.kubernetes import autoscaling, serving, weights
from infra.kubernetes.app_objects import minutes
from infra.kubernetes.components import apply

if TYPE_CHECKING:
    from sizing.plan import Pool


@dataclass
class ServingPoolArgs:
    pool: Pool
    namespace: str
    service_account_name: str  # the vLLM pods' (Pod Identity: read-only on the weights prefix)
    region: str
    weights_mode: str  # nvme | s3-stream (sizing.planning.node_storage.loading_mode)
    before_engine_s: float  # what runs before vLLM on a new node, s (sizing.perf.cold_start.before_engine_s)
    weights_bucket: pulumi.Input[str]
    weights_prefix: str  # the S3 prefix of the checkpoint this pool serves
    images: pulumi.Output[ImageRefs]
    queue_threshold: int  # waiting requests per replica that scale the pool up (autoscaling.queue_threshold)
    # what the pool waits for: its checkpoint's copy Job, the NVIDIA device plugin (and LWS for
    # multi-node pools) before the workload; the namespace, KEDA and Prometheus before the ScaledObject
    weights_job: pulumi.Resource
    device_plugin: pulumi.Resource
    namespace_ready: Sequence[pulumi.Resource]
    keda: pulumi.Resource
    metrics: pulumi.Resource
    leader_worker_set: pulumi.Resource | None = None
    efa_device_plugin: pulumi.Resource | None = None  # a pool on EFA waits for the plugin that advertises it
    min_replicas: int | None = None  # KEDA's floor from a trace plan (autoscaling.min_replicas); None = replicas
    pod_annotations: dict[str, str] = field(default_factory=dict)  # on every serving pod (serving.ServingContext)


class ServingPool(apply.MovedOutOfApp):
    def __init__(self, name: str, args: ServingPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("ServingPool", name, opts)
        pool, ns = args.pool, args.namespace

        def build(b: str, refs: ImageRefs) -> dict[str, Any]:
            source, sync = weights.weights_access(weights.WeightsLocation(b, args.weights_prefix), args.region,
                                                  args.weights_mode, refs.aws_cli)
            ctx = serving.ServingContext(ns, args.service_account_name, args.region, args.weights_mode, source,
                                         sync, args.before_engine_s, images=refs,
                                         pod_annotations=args.pod_annotations)
            return serving.workload(pool, ctx)

        shape = build("bucket", ImageRefs.upstream())  # kind and metadata depend on neither
        spec = pulumi.Output.all(args.weights_bucket, args.images).apply(lambda a: build(a[0], a[1])["spec"])
        deps = [args.weights_job, args.device_plugin] + \
            ([args.leader_worker_set] if args.leader_worker_set is not None else []) + \
            ([args.efa_device_plugin] if args.efa_device_plugin is not None else [])
        wait = minutes(serving.rollout_timeout_s(pool, args.before_engine_s))
        opts_ = self.child(deps, ignore_changes=["spec.replicas"],
                           custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait))
        self.workload: pulumi.CustomResource
        if shape["kind"] == "Deployment":
            self.workload = k8s.apps.v1.Deployment(f"deployment-{shape['metadata']['name']}",
                                                   metadata=shape["metadata"], spec=spec, opts=opts_)
        else:
            self.workload = k8s.apiextensions.CustomResource(
                f"leaderworkerset-{shape['metadata']['name']}", api_version=shape["apiVersion"],
                kind=shape["kind"], metadata=shape["metadata"], spec=spec, opts=opts_)
        apply.create(serving.disruption_budget(pool, ns), self.child(args.namespace_ready))
        apply.create(autoscaling.pool_scaled_object(pool, ns, args.queue_threshold, args.min_replicas),
                     self.child([*args.namespace_ready, args.keda, args.metrics]))
        self.register_outputs({})
