"""Which serving engine a pool runs (`pool.engine`: vllm | sglang) and what differs between them in its
containers: the image, the command, the environment that carries the API key, and the queue metric KEDA
scales on (the flags: infra/kubernetes/vllm_args.py, infra/kubernetes/sglang_args.py, dispatched by
infra/kubernetes/serving.py).
Everything else of a serving pod (weights path, probes on /health, labels, NetworkPolicy flows,
PodMonitor, fit checks) is the same for both. Data only: imports nothing of infra at run time.
No pulumi import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infra.config.registry import ImageRefs
    from sizing.plan import Plan, Pool

ENGINES = ("vllm", "sglang")


@dataclass(frozen=True)
class Engine:
    """One engine's container facts."""

    name: str
    image_key: str  # infra/data/versions.yaml images.<key>
    command: tuple[str, ...]
    api_key_env: str  # the env var the pod's API key Secret is mounted as
    # Prometheus series of requests waiting for a batch slot, as KEDA's query regex (infra/kubernetes/autoscaling.py)
    waiting_metric: str
    telemetry_env: tuple[tuple[str, str], ...]  # usage-stats opt-outs


VLLM = Engine(
    "vllm", "vllm", ("vllm", "serve"), "VLLM_API_KEY",
    # vllm 0.33.0 vllm/v1/metrics/loggers.py; the OpenTelemetry-normalised name too
    "vllm:num_requests_waiting|vllm_num_requests_waiting",
    (("VLLM_NO_USAGE_STATS", "1"), ("DO_NOT_TRACK", "1")))
# the server's entry point in the lmsysorg/sglang image (sglang/launch_server.py)
SGLANG_COMMAND = ("python3", "-m", "sglang.launch_server")
# SGLang reads its API key only from --api-key (sglang 0.5.23 arg_groups/fields/serving.py api_key; no
# environment variable): the pod passes $(SGLANG_API_KEY), which Kubernetes expands from the Secret-backed env
SGLANG_API_KEY_ENV = "SGLANG_API_KEY"
SGLANG = Engine(
    "sglang", "sglang", SGLANG_COMMAND, SGLANG_API_KEY_ENV,
    # sglang 0.5.23 sglang/srt/observability/metrics_collector.py: Gauge name="sglang:num_queue_reqs"
    # ("The number of requests in the waiting queue"), exported with --enable-metrics
    "sglang:num_queue_reqs|sglang_num_queue_reqs",
    (("DO_NOT_TRACK", "1"),))


def engine_of(pool: Pool) -> Engine:
    if pool.engine == "vllm":
        return VLLM
    if pool.engine == "sglang":
        return SGLANG
    raise ValueError(f"pool {pool.name}: llmcap deploys {', '.join(ENGINES)}, not {pool.engine!r}")


def images_in_use(plan: Plan, cluster_images: tuple[str, ...]) -> list[str]:
    """The keys of `cluster_images` (infra/config/registry.py CLUSTER_IMAGES) a plan's cluster pulls: every image but
    the engines', plus the engines its pools run."""
    engine_keys = {e.image_key for e in (VLLM, SGLANG)}
    used = {engine_of(p).image_key for p in plan.pools if p.engine in ENGINES}
    return [k for k in cluster_images if k not in engine_keys or k in used]


def image_of(pool: Pool, images: ImageRefs) -> str:
    return str(getattr(images, engine_of(pool).image_key))
