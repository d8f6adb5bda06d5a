"""A pool's ServingContext resolved from the stack: how its nodes load the weights
(sizing.planning.node_storage.loading_mode), from where (infra/kubernetes/weights.py) and how long a new node
takes before vLLM runs (sizing.perf.cold_start). The deployability checks and the tests build contexts
here; the ServingPool component gets the same two figures from infra/kubernetes/components/kubernetes_app.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.config.registry import ImageRefs
from infra.kubernetes.serving import ServingContext
from infra.kubernetes.weights import WeightsLocation, weights_access
from sizing.perf.cold_start import before_engine_s
from sizing.planning.node_storage import loading_mode

if TYPE_CHECKING:
    from sizing.plan import Pool


def serving_context(pool: Pool, namespace: str, service_account: str, region: str, where: WeightsLocation,
                    instance_store: bool, images: ImageRefs | None = None) -> ServingContext:
    """`instance_store`: llmcap:deployment.model_cache_on_instance_store."""
    refs = images or ImageRefs.upstream()
    mode = loading_mode(pool, instance_store)
    source, sync = weights_access(where, region, mode, refs.aws_cli)
    return ServingContext(namespace, service_account, region, mode, source, sync, before_engine_s(pool, mode),
                          images=refs)
