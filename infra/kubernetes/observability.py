"""Metrics: a PodMonitor (Prometheus Operator, from the pinned kube-prometheus-stack) scraping
every vLLM pod's /metrics, and a Grafana dashboard ConfigMap that the chart's dashboard sidecar
loads: measured TTFT, ITL, queue depth, KV-cache usage and tokens/s beside the plan's predicted
TTFT p95, ITL p95 and goodput as constant lines. Each pool's panels query its engine's series: vLLM's
(old and new names) or SGLang's (`--enable-metrics`). No pulumi import."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from infra.config import settings
from infra.kubernetes.k8s_common import APP_LABEL, COMPONENT_LABEL, PART_OF_LABEL, POOL_METRIC_LABEL, meta, serving_name

if TYPE_CHECKING:
    from sizing.plan import Plan, Pool

DASHBOARD_LABEL = "grafana_dashboard"
GRAFANA_ADMIN_SECRET = "grafana-admin"

# (current name, older names) as the pinned vLLM exports them (vllm/v1/metrics/loggers.py)
TTFT = "vllm:time_to_first_token_seconds_bucket"
ITL = "vllm:inter_token_latency_seconds_bucket|vllm:time_per_output_token_seconds_bucket"
WAITING = "vllm:num_requests_waiting|vllm_num_requests_waiting"
RUNNING = "vllm:num_requests_running|vllm_num_requests_running"
KV_USAGE = "vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc"
GEN_TOKENS = "vllm:generation_tokens_total|vllm_generation_tokens_total"
# SGLang 0.5.23's series for the same panels (sglang/srt/observability/metrics_collector.py: histograms
# sglang:time_to_first_token_seconds and sglang:inter_token_latency_seconds, gauges sglang:num_queue_reqs,
# sglang:num_running_reqs and sglang:token_usage (the KV pool's used share), counter sglang:generation_tokens_total)
SERIES = {
    "vllm": {"ttft": TTFT, "itl": ITL, "waiting": WAITING, "running": RUNNING, "kv": KV_USAGE, "gen": GEN_TOKENS},
    "sglang": {"ttft": "sglang:time_to_first_token_seconds_bucket", "itl": "sglang:inter_token_latency_seconds_bucket",
               "waiting": "sglang:num_queue_reqs", "running": "sglang:num_running_reqs", "kv": "sglang:token_usage",
               "gen": "sglang:generation_tokens_total"},
}

# NVIDIA DCGM exporter's default counters (the pinned chart's etc/default-counters.csv): utilisation in %,
# framebuffer memory in MiB, labelled with the pod that holds the GPU
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GPU_MEM_USED_MIB = "DCGM_FI_DEV_FB_USED"


DURATION_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}  # Prometheus duration suffixes


def duration_s(text: str) -> int:
    """A single-unit Prometheus duration ("15d", "15s") in seconds."""
    return int(text[:-1]) * DURATION_UNITS_S[text[-1]]


def storage_class(volume_type: str) -> dict[str, Any]:
    """The StorageClass of Prometheus's volume: the EBS CSI driver's (provisioner ebs.csi.aws.com,
    parameters `type` and `encrypted`: kubernetes-sigs/aws-ebs-csi-driver docs/parameters.md)."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": meta(settings.policy().observability.storage_class, None),
            "provisioner": "ebs.csi.aws.com", "parameters": {"type": volume_type, "encrypted": "true"},
            "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": True, "reclaimPolicy": "Delete"}


def kube_prometheus_values(prometheus_requests: dict[str, str], node_exporter: dict[str, Any],
                           volume_gib: int, retention_size_gib: int) -> dict[str, Any]:
    """The kube-prometheus-stack values: Prometheus with the requests the system node group was sized for
    and its blocks on a `volume_gib` PersistentVolume it fills to at most `retention_size_gib`
    (sizing/planning/metrics_storage.py), node-exporter with the requests the node-allocatable model
    subtracts (all resolved by infra/kubernetes/components/kubernetes_app.py from sizing/data)."""
    o = settings.policy().observability
    return {
        "prometheus": {"prometheusSpec": {
            "resources": {"requests": prometheus_requests},
            # pick up PodMonitors/ServiceMonitors from every namespace, not only the chart's own
            "podMonitorSelectorNilUsesHelmValues": False,
            "serviceMonitorSelectorNilUsesHelmValues": False,
            "retention": o.retention,
            # Prometheus reads sizes in base-2 units (--storage.tsdb.retention.size: "512MB" is 512 MiB)
            "retentionSize": f"{retention_size_gib}GB",
            "storageSpec": {"volumeClaimTemplate": {"spec": {
                "storageClassName": o.storage_class, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": f"{volume_gib}Gi"}}}}},
        }},
        "grafana": {
            # never the chart's well-known default password: a generated one, kept in this Secret
            # (`kubectl -n monitoring get secret grafana-admin`)
            "admin": {"existingSecret": GRAFANA_ADMIN_SECRET, "userKey": "admin-user",
                      "passwordKey": "admin-password"},
            "sidecar": {"dashboards": {"enabled": True, "label": DASHBOARD_LABEL, "labelValue": "1",
                                       "searchNamespace": "ALL"}},
        },
        # node-exporter runs on every node, GPU nodes included: its requests are the ones the
        # node-allocatable model subtracts (sizing/data/node_daemonsets.csv)
        "prometheus-node-exporter": {"resources": node_exporter},
    }


def pod_monitor(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
        "metadata": meta("vllm", namespace, {PART_OF_LABEL: "llmcap"}),
        "spec": {
            "selector": {"matchLabels": {APP_LABEL: "vllm", COMPONENT_LABEL: "serving"}},
            "podMetricsEndpoints": [{
                "port": "http", "path": "/metrics", "interval": settings.policy().observability.scrape_interval,
                "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_label_llmcap_io_pool"],
                                 "targetLabel": POOL_METRIC_LABEL, "action": "replace"}],
            }],
        },
    }


def _sel(names: str, namespace: str, pool: Pool) -> str:
    return f'{{__name__=~"{names}", namespace="{namespace}", {POOL_METRIC_LABEL}="{pool.name}"}}'


def _panel(pid: int, title: str, unit: str, targets: list[tuple[str, str]], x: int, y: int) -> dict[str, Any]:
    return {
        "id": pid, "type": "timeseries", "title": title,
        "datasource": {"type": "prometheus", "uid": "prometheus"},
        "gridPos": {"h": 8, "w": 8, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": [
            {"matcher": {"id": "byRegexp", "options": "^plan.*"},
             "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]}]},
        "targets": [{"refId": chr(65 + i), "expr": expr, "legendFormat": legend}
                    for i, (expr, legend) in enumerate(targets)],
    }


def pool_panels(pool: Pool, namespace: str, first_id: int, y: int) -> list[dict[str, Any]]:
    r = pool.per_replica
    ns = namespace

    def q95(names: str) -> str:
        return f"1000 * histogram_quantile(0.95, sum by (le) (rate({_sel(names, ns, pool)}[5m])))"

    p = pool.name
    m = SERIES.get(pool.engine, SERIES["vllm"])
    waiting, running, kv, gen = (_sel(m[k], ns, pool) for k in ("waiting", "running", "kv", "gen"))
    return [
        _panel(first_id, f"{p}: TTFT p95", "ms",
               [(q95(m["ttft"]), "measured p95"), (f"vector({r.ttft_p95_ms:g})", "plan p95")], 0, y),
        _panel(first_id + 1, f"{p}: inter-token latency p95", "ms",
               [(q95(m["itl"]), "measured p95"), (f"vector({r.itl_p95_ms:g})", "plan p95")], 8, y),
        _panel(first_id + 2, f"{p}: queue depth", "short",
               [(f"sum({waiting})", "waiting"), (f"sum({running})", "running"),
                (f"vector({r.planned_concurrency * pool.replicas:g})", "plan concurrency")], 16, y),
        _panel(first_id + 3, f"{p}: KV-cache usage", "percentunit",
               [(f"avg({kv})", "mean over replicas"), (f"max({kv})", "busiest replica")], 0, y + 8),
        _panel(first_id + 4, f"{p}: output tokens/s", "short",
               [(f"sum(rate({gen}[1m]))", "measured"),
                (f"vector({r.goodput_output_tokens_per_s * pool.replicas:g})", "plan goodput (planned replicas)"),
                (f"vector({r.planned_output_tokens_per_s * pool.replicas:g})", "plan load")], 8, y + 8),
        _panel(first_id + 5, f"{p}: GPU utilisation (DCGM)", "percent",
               [(f"avg({_gpu(GPU_UTIL, ns, pool)})", "mean over GPUs"),
                (f"min({_gpu(GPU_UTIL, ns, pool)})", "least busy GPU")], 16, y + 8),
        _panel(first_id + 6, f"{p}: GPU memory used per GPU (DCGM)", "decgbytes",
               [(f"max({_gpu(GPU_MEM_USED_MIB, ns, pool)}) / 1024", "measured (fullest GPU)"),
                (f"vector({r.weights_gib_per_gpu + r.kv_cache_gib_per_gpu:g})", "plan weights + KV cache")], 0, y + 16),
    ]


def _gpu(metric: str, namespace: str, pool: Pool) -> str:
    """A DCGM series of the GPUs held by the pool's pods (Deployment pods vllm-<pool>-<hash>, LWS pods
    vllm-<pool>-<group>[-<worker>])."""
    return f'{metric}{{namespace="{namespace}", pod=~"{serving_name(pool.name)}-.*"}}'


def dashboard(plan: Plan, namespace: str) -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    for i, pool in enumerate(plan.pools):
        panels += pool_panels(pool, namespace, first_id=1 + 10 * i, y=24 * i)
    engines = sorted({p.engine for p in plan.pools})
    names = " + ".join({"vllm": "vLLM", "sglang": "SGLang"}.get(e, e) for e in engines)
    return {"uid": f"llmcap-{plan.stack}"[:40], "title": f"llmcap {plan.stack}: {names} predicted vs actual",
            "tags": ["llmcap", *engines], "schemaVersion": 39, "editable": False, "refresh": "30s",
            "time": {"from": "now-6h", "to": "now"}, "panels": panels}


def dashboard_config_map(plan: Plan, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": meta("llmcap-dashboard", namespace, {DASHBOARD_LABEL: "1", PART_OF_LABEL: "llmcap"}),
            "data": {"llmcap-vllm.json": json.dumps(dashboard(plan, namespace), indent=1, sort_keys=True)}}
