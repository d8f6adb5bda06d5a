"""Autoscaling on queue depth, not CPU: one KEDA ScaledObject per pool on the Prometheus series of its
engine's waiting requests (infra/kubernetes/engines.py: vLLM `vllm:num_requests_waiting`, SGLang
`sglang:num_queue_reqs`;
the regexes also accept the OpenTelemetry-normalised names). min = the plan's replicas, max = the pool's
replicas_max; a plan from a
trace (`Plan.fleet`, sizing/planning/class_results.py) sets min (the quietest minute's replicas plus the warm
standby its busiest ramp needs) and the queue threshold, read here as they are; in a dedicated layout each
class's pool takes its own class's (`Plan.fleet.class_autoscaling`). No pulumi import."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from infra.config import settings
from infra.kubernetes.engines import engine_of
from infra.kubernetes.k8s_common import POOL_METRIC_LABEL, PROMETHEUS_URL, meta, serving_labels, serving_name

if TYPE_CHECKING:
    from sizing.plan import ClassAutoscaling, Plan, Pool

KEDA_API_VERSION = "keda.sh/v1alpha1"


def queue_query(namespace: str, pool: Pool) -> str:
    return (f'sum({{__name__=~"{engine_of(pool).waiting_metric}", namespace="{namespace}", '
            f'{POOL_METRIC_LABEL}="{pool.name}"}})')


def _fleet_pool(plan: Plan, pool: Pool) -> bool:
    """The trace-planned fleet's autoscaling applies to a single-pool plan's pool."""
    f = plan.fleet
    return f is not None and bool(f.autoscaling_why) and len(plan.pools) == 1 and plan.pools[0].name == pool.name


def _class_bounds(plan: Plan, pool: Pool) -> ClassAutoscaling | None:
    """A dedicated layout's class pool: its class's own KEDA bounds (Plan.fleet.class_autoscaling)."""
    if plan.fleet is None or pool.request_class is None:
        return None
    return plan.fleet.class_autoscaling.get(pool.request_class)


def min_replicas(plan: Plan, pool: Pool) -> int:
    """KEDA's minReplicaCount: a class pool's from its class's load, the trace's (Plan.fleet) where the plan
    has one pool, else the pool's replicas."""
    c = _class_bounds(plan, pool)
    if c is not None:
        return max(1, min(c.min_replicas, pool.replicas))
    if _fleet_pool(plan, pool):
        assert plan.fleet is not None
        return max(1, min(plan.fleet.autoscaling_min_replicas, pool.replicas))
    return pool.replicas


def queue_threshold(plan: Plan, pool: Pool) -> int:
    """Waiting requests per replica that trigger a scale-up. A queue of q requests delays a new
    request by about q / goodput_requests_per_s (the replica drains its queue at its goodput), so
    the TTFT headroom the plan leaves (SLO p95 minus predicted p95 at planned load) bounds how long
    a queue may stand: q = headroom_s × goodput_requests_per_s, at least `minimum_threshold`."""
    a = settings.policy().autoscaling
    c = _class_bounds(plan, pool)
    if c is not None:
        return max(a.minimum_threshold, c.queue_threshold)
    if _fleet_pool(plan, pool) and plan.fleet is not None and plan.fleet.queue_threshold > 0:
        return max(a.minimum_threshold, plan.fleet.queue_threshold)
    # the tightest queueing headroom among the SLO's TTFT targets (E2E when it sets no TTFT target)
    targets = plan.workload.slo.targets()
    waits = [t for t in targets if t[0] == "ttft"] or [t for t in targets if t[0] == "e2e"]
    if not waits:
        return a.minimum_threshold
    headroom_s = min(max(v - pool.per_replica.percentile(m, q), 0.0) for m, q, v in waits) / 1000.0
    q = math.floor(headroom_s * pool.per_replica.goodput_requests_per_s * a.headroom_share)
    return max(a.minimum_threshold, q)


def pool_scaled_object(pool: Pool, namespace: str, threshold: int, min_replicas: int | None = None) -> dict[str, Any]:
    """The pool's ScaledObject; `threshold`: waiting requests per replica that trigger a scale-up
    (queue_threshold); `min_replicas`: KEDA's floor (the module's `min_replicas`; None = the pool's replicas)."""
    a = settings.policy().autoscaling
    if pool.replicas_max < pool.replicas:
        raise ValueError(f"pool {pool.name}: replicas_max {pool.replicas_max} < replicas {pool.replicas}")
    multi = pool.nodes_per_replica > 1
    target = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet"} if multi else \
        {"apiVersion": "apps/v1", "kind": "Deployment"}
    target["name"] = serving_name(pool.name)
    return {
        "apiVersion": KEDA_API_VERSION, "kind": "ScaledObject",
        "metadata": meta(serving_name(pool.name), namespace, serving_labels(pool.name)),
        "spec": {
            "scaleTargetRef": target,
            "minReplicaCount": pool.replicas if min_replicas is None else min_replicas,
            "maxReplicaCount": pool.replicas_max,
            "pollingInterval": a.polling_interval_s,
            "cooldownPeriod": a.cooldown_period_s,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
                # a new replica needs minutes to load weights: scale up at once, scale down slowly
                "scaleUp": {"stabilizationWindowSeconds": 0,
                            "policies": [{"type": "Pods", "value": a.scale_up.pods,
                                          "periodSeconds": a.scale_up.period_s}]},
                "scaleDown": {"stabilizationWindowSeconds": a.cooldown_period_s,
                              "policies": [{"type": "Pods", "value": a.scale_down.pods,
                                            "periodSeconds": a.scale_down.period_s}]},
            }}},
            "triggers": [{
                "type": "prometheus",
                "metricType": "AverageValue",  # the query's sum is divided by the current replicas
                "metadata": {"serverAddress": PROMETHEUS_URL, "query": queue_query(namespace, pool),
                             "threshold": str(threshold), "ignoreNullValues": "true"},
            }],
        },
    }
