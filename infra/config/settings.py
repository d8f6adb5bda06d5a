"""Typed access to the Kubernetes side's data files (no pulumi import): pinned images and charts
(infra/data/versions.yaml), serving policy constants (infra/data/serving.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

DATA_DIR = Path(__file__).parent.parent / "data"


@dataclass(frozen=True)
class Image:
    image: str  # the repository path on its registry, e.g. vllm/vllm-openai
    tag: str
    registry: str = "docker.io"  # the upstream registry host
    digest: str | None = None  # sha256:..., only from the image lock (infra/config/image_lock.py)

    @property
    def pin(self) -> str:
        return f":{self.tag}@{self.digest}" if self.digest else f":{self.tag}"

    @property
    def ref(self) -> str:
        """The upstream reference (Docker Hub images without the host, as `docker pull` names them)."""
        host = "" if self.registry == "docker.io" else f"{self.registry}/"
        return f"{host}{self.image}{self.pin}"


@dataclass(frozen=True)
class Chart:
    name: str  # the release name
    chart: str
    repo: str  # "" for an OCI chart reference
    version: str
    namespace: str


@cache
def _load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((DATA_DIR / name).read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{DATA_DIR / name}: expected a mapping")
    return doc


def image(key: str) -> Image:
    v = _load("versions.yaml")["images"][key]
    return Image(image=str(v["image"]), tag=str(v["tag"]), registry=str(v.get("registry") or "docker.io"))


def image_keys() -> list[str]:
    """The keys of versions.yaml `images` (llmcap's own containers and the compose target's)."""
    return list(_load("versions.yaml")["images"])


def chart_keys() -> list[str]:
    return list(_load("versions.yaml")["charts"])


def charts_not_locked() -> dict[str, str]:
    """Charts whose images run at the chart's defaults (not through the cache, not locked), with why
    (versions.yaml `charts.<key>.images_not_locked`)."""
    return {k: str(v["images_not_locked"]) for k, v in _load("versions.yaml")["charts"].items()
            if v.get("images_not_locked")}


def chart_image_values_key(key: str) -> str:
    """Where the chart's values hold its image's repository and tag (versions.yaml `values_key`)."""
    return str(_load("versions.yaml")["charts"][key]["image"].get("values_key") or "image")


def chart_image_pin(key: str) -> Image | None:
    """The image of a chart that llmcap routes through the registry cache, at the tag the chart runs
    (versions.yaml `charts.<key>.image`), or None."""
    v = _load("versions.yaml")["charts"][key].get("image")
    return Image(image=str(v["path"]), tag=str(v["tag"]), registry=str(v["registry"])) if v else None


def tls() -> dict[str, Any]:
    """infra/data/tls.yaml: where the endpoint's certificate comes from, the created one's settings."""
    return _load("tls.yaml")


def registries() -> dict[str, Any]:
    """infra/data/registries.yaml: upstream registries, their pull-through cache prefixes, the rules' sources."""
    return _load("registries.yaml")


def chart(key: str) -> Chart:
    v = _load("versions.yaml")["charts"][key]
    return Chart(name=key.replace("_", "-"), chart=str(v["chart"]), repo=str(v["repo"]),
                 version=str(v["version"]), namespace=str(v["namespace"]))




def chart_field(key: str, name: str) -> str:
    """One field of a chart's versions.yaml entry, as text (e.g. `image_path`)."""
    return str(_load("versions.yaml")["charts"][key][name])


def chart_app_version(key: str) -> str:
    """The application version a chart installs (its appVersion), where the versions file records it."""
    return str(_load("versions.yaml")["charts"][key]["app_version"])


@dataclass(frozen=True)
class Compatibility:
    """One row of the compatibility table: a component version and the Kubernetes minors it supports."""

    version: str
    kubernetes_min: str
    kubernetes_max: str | None  # None: the source states only a minimum
    rule: str
    source: str
    as_of: str


def compatibility() -> dict[str, Compatibility]:
    """infra/data/versions.yaml `compatibility`: component key -> its row."""
    rows = _load("versions.yaml")["compatibility"]
    return {k: Compatibility(version=str(v["version"]), kubernetes_min=str(v["kubernetes_min"]),
                             kubernetes_max=None if v["kubernetes_max"] is None else str(v["kubernetes_max"]),
                             rule=str(v["rule"]), source=str(v["source"]), as_of=str(v["as_of"]))
            for k, v in rows.items()}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StartupPolicy(_Strict):
    margin_s: float  # added to the plan's weights_load_s (s)
    safety_factor: float
    period_s: int
    timeout_s: int


class ProbePolicy(_Strict):
    period_s: int
    failure_threshold: int
    timeout_s: int | None = None  # None: Kubernetes' default


class WorkerProbePolicy(_Strict):
    http_timeout_s: int  # the leader's /health call inside the exec probe (s)
    timeout_s: int  # the exec probe's own timeout (s)


class RolloutPolicy(_Strict):
    margin_s: int  # added to the rollout budget for Pulumi's wait (s)


class SizeLimit(_Strict):
    size_limit: str  # a Kubernetes quantity, e.g. 20Gi


class PodPolicy(_Strict):
    termination_grace_period_s: int


class Requests(_Strict):
    cpu: str  # Kubernetes quantities, requests = limits for memory
    memory: str


class RouterPolicy(_Strict):
    replicas: int
    port: int
    cpu_request: str
    memory_request: str
    routing_logic: str
    engine_stats_interval_s: int
    request_stats_window_s: int
    startup_probe: ProbePolicy
    readiness_probe: ProbePolicy
    liveness_probe: ProbePolicy
    min_available: int
    https_port: int
    http_port: int
    tls_policy: str


class ScaleStep(_Strict):
    pods: int
    period_s: int


class AutoscalingPolicy(_Strict):
    polling_interval_s: int
    cooldown_period_s: int
    headroom_share: float
    minimum_threshold: int
    scale_up: ScaleStep
    scale_down: ScaleStep


class WeightsJobPolicy(_Strict):
    active_deadline_s: int
    backoff_limit: int
    download: Requests
    upload: Requests
    sync: Requests


class SmokePolicy(_Strict):
    margin_s: int  # beyond the slowest pool's rollout timeout (infra/kubernetes/smoke.py deadline_s)
    backoff_limit: int
    resources: Requests


class ObservabilityPolicy(_Strict):
    grafana_password_bytes: int
    retention: str  # a Prometheus duration, e.g. 15d
    scrape_interval: str
    storage_class: str  # the StorageClass of Prometheus's volume (infra/kubernetes/observability.py storage_class)


class HealthcheckPolicy(_Strict):
    interval_s: int
    timeout_s: int
    retries: int
    http_timeout_s: int  # the /health call inside the check (s)


class NetworkPolicyPolicy(_Strict):
    dns_namespace: str
    dns_pod_labels: dict[str, str]
    dns_port: int
    pod_identity_agent_cidrs: list[str]
    pod_identity_agent_port: int
    https_port: int
    prometheus_pod_labels: dict[str, str]


class ServingPolicy(_Strict):
    """infra/data/serving.yaml: serving policy constants (probe timings, volume caps, the router,
    autoscaling steps, the copy Job, metrics, NetworkPolicies); the file says why each has its value."""

    startup: StartupPolicy
    readiness: ProbePolicy
    liveness: ProbePolicy
    worker_probe: WorkerProbePolicy
    rollout: RolloutPolicy
    shm: SizeLimit
    home: SizeLimit
    scratch: SizeLimit
    pod: PodPolicy
    router: RouterPolicy
    autoscaling: AutoscalingPolicy
    weights_job: WeightsJobPolicy
    smoke: SmokePolicy
    observability: ObservabilityPolicy
    compose_healthcheck: HealthcheckPolicy
    vllm_port: int
    network_policy: NetworkPolicyPolicy


@cache
def policy() -> ServingPolicy:
    """infra/data/serving.yaml, validated: a missing, misspelt or mistyped key raises one ValueError
    naming the file and the key."""
    return parse_policy(_load("serving.yaml"), DATA_DIR / "serving.yaml")


def parse_policy(doc: dict[str, Any], path: Path) -> ServingPolicy:
    """Validate a serving.yaml document; the first problem as one ValueError line naming `path` and the key."""
    try:
        return ServingPolicy.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{path}: {where}: {first['msg']}") from None


def vllm_flags() -> dict[str, Any]:
    return _load("vllm_flags.yaml")


def sglang_flags() -> dict[str, Any]:
    """Every option of the pinned SGLang release's launch_server (scripts/build_sglang_flags.py)."""
    return _load("sglang_flags.yaml")


def sglang_values() -> dict[str, Any]:
    """Plan values -> SGLang's names for them (infra/data/sglang_values.yaml)."""
    return _load("sglang_values.yaml")
