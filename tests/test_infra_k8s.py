"""The Kubernetes side under Pulumi's mock engine, for every bundled stack: objects validate against
the OpenAPI schema of the pinned Kubernetes version; GPU requests, vLLM flags and replica counts
equal the plan; the API key is required; probes, PDBs and the autoscaler are right. Failures name
the stack and the object."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import kubernetes_validate
import pytest

from infra.config import settings
from infra.config.names import GPU_TAINT_KEY, POOL_LABEL
from infra.config.platform import load_platform
from infra.kubernetes import autoscaling, sglang_args
from infra.kubernetes.k8s_common import API_KEY_SECRET, ENDPOINT_LABEL, serving_name
from infra.kubernetes.serving import startup_budget_s
from tests.k8s_support import STACK_IDS, find, flag_values, objects, rendered

if TYPE_CHECKING:
    from sizing.plan import Pool

K8S_VERSION = load_platform().kubernetes_version
# custom resources: not in the Kubernetes OpenAPI schema (Karpenter's EC2NodeClass and NodePool are checked against
# their own CRD schemas in tests/test_karpenter.py)
CUSTOM_KINDS = {"LeaderWorkerSet", "ScaledObject", "PodMonitor", "EC2NodeClass", "NodePool"}


def _pod_specs(workload: dict) -> list[tuple[str, dict, bool]]:
    """(role, pod spec, serves HTTP) of a Deployment or a LeaderWorkerSet."""
    if workload["kind"] == "Deployment":
        return [("pod", workload["spec"]["template"]["spec"], True)]
    t = workload["spec"]["leaderWorkerTemplate"]
    return [("leader", t["leaderTemplate"]["spec"], True), ("worker", t["workerTemplate"]["spec"], False)]


# the fast run validates a Deployment stack (dev), a LeaderWorkerSet one (llama405b) and an SGLang one; CI all
@pytest.mark.parametrize("stack_id", [s if s in ("dev", "llama405b", "sglang") else
                                      pytest.param(s, marks=pytest.mark.slow) for s in STACK_IDS])
def test_builtin_objects_validate_against_openapi_schema(stack_id: str) -> None:
    problems = []
    for obj in objects(stack_id):
        if obj["kind"] in CUSTOM_KINDS:
            continue
        if obj["kind"] == "Secret":  # the engine redacts secret values; validate the shape around them
            assert obj["stringData"] == "[secret]", f"{stack_id}: Secret/{obj['metadata']['name']} not redacted"
            obj = {**obj, "stringData": {"key": "redacted"}}
        try:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.append(f"{stack_id}: {obj['kind']}/{obj['metadata']['name']}: {e.message}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_serving_workloads_follow_the_plan(stack_id: str) -> None:
    result, _ = rendered(stack_id)
    objs = objects(stack_id)
    for pool in result.plan.pools:
        kind = "LeaderWorkerSet" if pool.nodes_per_replica > 1 else "Deployment"
        w = find(objs, kind, serving_name(pool.name))
        where = f"{stack_id}: {kind}/{w['metadata']['name']}"
        assert w["spec"]["replicas"] == pool.replicas, where
        if kind == "LeaderWorkerSet":
            assert w["spec"]["leaderWorkerTemplate"]["size"] == pool.nodes_per_replica, where
        else:
            # a pool on a reservation has no node for a surge replica: one at a time, its spare covers it
            want = {"maxUnavailable": 1, "maxSurge": 0} if pool.capacity_reservation_id else \
                {"maxUnavailable": 0, "maxSurge": 1}
            assert w["spec"]["strategy"]["rollingUpdate"] == want, where
        gpus_per_pod = pool.tensor_parallel * pool.pipeline_parallel // pool.nodes_per_replica
        for role, spec, serves_http in _pod_specs(w):
            c = spec["containers"][0]
            res = c["resources"]
            assert res["limits"]["nvidia.com/gpu"] == str(gpus_per_pod), f"{where} {role}"
            assert res["requests"]["nvidia.com/gpu"] == str(gpus_per_pod), f"{where} {role}"
            flags = flag_values(c["args"])
            v = pool.vllm
            if pool.engine == "sglang":
                _sglang_flags_follow_the_plan(pool, c, flags, f"{where} {role}")
                continue
            expected = {"--tensor-parallel-size": str(v.tensor_parallel_size),
                        "--pipeline-parallel-size": str(v.pipeline_parallel_size),
                        "--max-model-len": str(v.max_model_len), "--max-num-seqs": str(v.max_num_seqs),
                        "--max-num-batched-tokens": str(v.max_num_batched_tokens),
                        "--gpu-memory-utilization": f"{v.gpu_memory_utilization:g}",
                        "--kv-cache-dtype": v.kv_cache_dtype, "--served-model-name": v.served_model_name}
            for flag, value in expected.items():
                assert flags.get(flag) == value, f"{where} {role}: {flag} {flags.get(flag)} != plan {value}"
            assert (flags.get("--quantization") or None) == v.quantization, f"{where} {role}"
            assert ("--enable-prefix-caching" in flags) == v.enable_prefix_caching, f"{where} {role}"
            allowed = set(settings.vllm_flags()["flags"])
            assert set(flags) <= allowed, f"{where} {role}: {sorted(set(flags) - allowed)} not in the allowlist"
            # the API key is required, from a Secret, never on the command line
            env = {e["name"]: e for e in c["env"]}
            assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == API_KEY_SECRET, f"{where} {role}"
            assert "--api-key" not in flags, f"{where} {role}"
            # GPU taint tolerated, pinned to the pool's nodes, spread over nodes and zones
            assert any(t["key"] == GPU_TAINT_KEY and t["effect"] == "NoSchedule" for t in spec["tolerations"])
            term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert term["nodeSelectorTerms"][0]["matchExpressions"][0] == \
                {"key": POOL_LABEL, "operator": "In", "values": [pool.name]}, f"{where} {role}"
            keys = {t["topologyKey"] for t in spec["topologySpreadConstraints"]}
            assert keys == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}, f"{where} {role}"
            shm = [vol for vol in spec["volumes"] if vol["name"] == "dshm"][0]
            assert shm["emptyDir"]["medium"] == "Memory", f"{where} {role}"
            assert spec["securityContext"]["runAsNonRoot"] is True, f"{where} {role}"
            if serves_http:
                budget = c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"]
                assert budget >= startup_budget_s(pool) > pool.per_replica.weights_load_s, f"{where} {role}"
                assert c["readinessProbe"]["httpGet"]["path"] == "/health", f"{where} {role}"
                assert "livenessProbe" in c, f"{where} {role}"


def _sglang_flags_follow_the_plan(pool: Pool, c: dict[str, Any], flags: dict[str, str | None], where: str) -> None:
    """An SGLang container: the plan's fields under SGLang's flag names, the whole command line accepted by
    the pinned release's parser, the API key from the Secret (expanded by Kubernetes, never in the spec)."""
    v = pool.vllm
    assert c["command"] == ["python3", "-m", "sglang.launch_server"], where
    expected = {"--tp": str(v.tensor_parallel_size), "--context-length": str(v.max_model_len),
                "--max-running-requests": str(v.max_num_seqs),
                "--chunked-prefill-size": str(v.max_num_batched_tokens),
                "--mem-fraction-static": f"{v.gpu_memory_utilization:g}", "--served-model-name": v.served_model_name,
                "--api-key": "$(SGLANG_API_KEY)"}
    for flag, value in expected.items():
        assert flags.get(flag) == value, f"{where}: {flag} {flags.get(flag)} != plan {value}"
    # SGLang's name for the plan's (vLLM-named) method (infra/data/sglang_values.yaml quantization)
    want = settings.sglang_values().get("quantization", {}).get(v.quantization, v.quantization)
    assert "--enable-metrics" in flags and (flags.get("--quantization") or None) == want, where
    sglang_args.check_args(c["args"])
    env = {e["name"]: e for e in c["env"]}
    assert env["SGLANG_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == API_KEY_SECRET, where


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_disruption_budget_keeps_the_replicas_demand_needs(stack_id: str) -> None:
    result, _ = rendered(stack_id)
    objs = objects(stack_id)
    for pool in result.plan.pools:
        pdb = find(objs, "PodDisruptionBudget", serving_name(pool.name))
        assert pdb["spec"]["minAvailable"] == pool.replicas_for_demand * pool.nodes_per_replica, stack_id
        assert pdb["spec"]["selector"]["matchLabels"][POOL_LABEL] == pool.name, stack_id


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_autoscaler_targets_the_pool_workload_on_queue_depth(stack_id: str) -> None:
    result, _ = rendered(stack_id)
    objs = objects(stack_id)
    for pool in result.plan.pools:
        so = find(objs, "ScaledObject", serving_name(pool.name))
        kind = "LeaderWorkerSet" if pool.nodes_per_replica > 1 else "Deployment"
        ref = so["spec"]["scaleTargetRef"]
        assert (ref["kind"], ref["name"]) == (kind, serving_name(pool.name)), stack_id
        find(objs, kind, ref["name"])  # the target exists
        # the pool's replicas; a trace plan's (or a class pool's) floor from its load over time, never above them
        assert so["spec"]["minReplicaCount"] == autoscaling.min_replicas(result.plan, pool) <= pool.replicas, stack_id
        if result.plan.fleet is None:
            assert so["spec"]["minReplicaCount"] == pool.replicas, stack_id
        assert so["spec"]["maxReplicaCount"] == pool.replicas_max, stack_id
        trig = so["spec"]["triggers"][0]
        assert trig["type"] == "prometheus", stack_id
        q = trig["metadata"]["query"]
        metric = {"vllm": "vllm:num_requests_waiting|vllm_num_requests_waiting",
                  "sglang": "sglang:num_queue_reqs|sglang_num_queue_reqs"}[pool.engine]
        assert f'__name__=~"{metric}"' in q, q
        assert f'pool="{pool.name}"' in q, q
        assert int(trig["metadata"]["threshold"]) >= 1, stack_id


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_router_is_internal_and_discovers_only_serving_endpoints(stack_id: str) -> None:
    objs = objects(stack_id)
    svc = find(objs, "Service", "llmcap-router")
    ann = svc["metadata"]["annotations"]
    assert ann["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal", stack_id
    assert svc["spec"]["type"] == "LoadBalancer" and "loadBalancerSourceRanges" not in svc["spec"], stack_id
    args = find(objs, "Deployment", "llmcap-router")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"{ENDPOINT_LABEL}=true" in flag_values(args)["--k8s-label-selector"], stack_id
    assert find(objs, "Secret", API_KEY_SECRET)["stringData"] == "[secret]", stack_id
    # TLS by default: the certificate the deployment creates (tests/test_endpoint_tls.py)
    assert rendered(stack_id)[0].outputs["endpoint"].startswith("https://"), stack_id


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_metrics_and_dashboard(stack_id: str) -> None:
    result, _ = rendered(stack_id)
    objs = objects(stack_id)
    pm = find(objs, "PodMonitor", "vllm")
    assert pm["spec"]["podMetricsEndpoints"][0]["path"] == "/metrics"
    import json
    dash = json.loads(find(objs, "ConfigMap", "llmcap-dashboard")["data"]["llmcap-vllm.json"])
    exprs = " ".join(t["expr"] for p in dash["panels"] for t in p["targets"])
    for pool in result.plan.pools:
        assert f"vector({pool.per_replica.ttft_p95_ms:g})" in exprs, stack_id
        assert f"vector({pool.per_replica.itl_p95_ms:g})" in exprs, stack_id
    expected = {"vllm": ("vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
                         "vllm:time_per_output_token_seconds_bucket", "vllm:kv_cache_usage_perc",
                         "vllm:gpu_cache_usage_perc", "vllm:generation_tokens_total"),
                "sglang": ("sglang:time_to_first_token_seconds_bucket", "sglang:inter_token_latency_seconds_bucket",
                           "sglang:token_usage", "sglang:generation_tokens_total")}
    for engine in {p.engine for p in result.plan.pools}:
        for metric in expected[engine]:
            assert metric in exprs, f"{stack_id}: {metric}"


def test_llama405b_renders_a_leader_worker_set_with_the_plan_group_size() -> None:
    result, _ = rendered("llama405b")
    pool = result.plan.pools[0]
    assert pool.nodes_per_replica > 1, "the 405B BF16 stack must plan multi-node replicas"
    lws = find(objects("llama405b"), "LeaderWorkerSet", serving_name(pool.name))
    t = lws["spec"]["leaderWorkerTemplate"]
    assert t["size"] == pool.nodes_per_replica
    leader = flag_values(t["leaderTemplate"]["spec"]["containers"][0]["args"])
    worker = flag_values(t["workerTemplate"]["spec"]["containers"][0]["args"])
    assert leader["--nnodes"] == worker["--nnodes"] == str(pool.nodes_per_replica)
    assert leader["--node-rank"] == "0" and worker["--node-rank"] == "$(LWS_WORKER_INDEX)"
    assert "--headless" in worker and "--headless" not in leader
    assert t["leaderTemplate"]["metadata"]["labels"][ENDPOINT_LABEL] == "true"
    assert ENDPOINT_LABEL not in t["workerTemplate"]["metadata"]["labels"]
    releases = {r["name"] for r in rendered("llama405b")[1] if r["type"] == "kubernetes:helm.sh/v3:Release"}
    assert "leaderworkerset" in releases


def test_helm_releases_are_pinned_from_the_versions_file() -> None:
    _, docs = rendered("dev")
    releases = {r["name"]: r["inputs"] for r in docs if r["type"] == "kubernetes:helm.sh/v3:Release"}
    assert {"nvidia-device-plugin", "keda", "kube-prometheus-stack"} <= set(releases)
    assert "leaderworkerset" not in releases  # single-node plans do not install LWS
    for key in ("nvidia_device_plugin", "keda", "kube_prometheus_stack"):
        c = settings.chart(key)
        assert releases[c.name]["version"] == c.version and releases[c.name]["chart"] == c.chart
    # never the chart's well-known default Grafana password: a generated one in a Secret
    admin = releases["kube-prometheus-stack"]["values"]["grafana"]["admin"]
    assert "adminPassword" not in releases["kube-prometheus-stack"]["values"]["grafana"]
    secret = find(objects("dev"), "Secret", admin["existingSecret"])
    assert secret["metadata"]["namespace"] == "monitoring" and secret["stringData"] == "[secret]"


def test_startup_budget_grows_with_the_plan_weight_load_time() -> None:
    from tests.plan_factory import make_pool
    fast, slow = make_pool(), make_pool()
    slow = slow.model_copy(update={"per_replica": slow.per_replica.model_copy(update={"weights_load_s": 900.0})})
    s = settings.policy().startup
    assert startup_budget_s(slow) - startup_budget_s(fast) == math.ceil((900.0 - 40.0) * s.safety_factor)
