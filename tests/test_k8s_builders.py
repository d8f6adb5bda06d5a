"""Builders of the Kubernetes objects from hand-made plans (tests/plan_factory.py): multi-node
LeaderWorkerSets, weight-loading choice, the public endpoint, manifests on disk."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import kubernetes_validate
import pytest
import yaml

from infra.config.platform import load_platform
from infra.kubernetes import router, serving
from infra.kubernetes.autoscaling import queue_threshold
from infra.kubernetes.serving_context import serving_context
from infra.kubernetes.weights import WeightsLocation
from sizing.deployment import DeploymentOptions
from sizing.planning.node_storage import loading_mode
from tests.k8s_support import rendered
from tests.plan_factory import make_plan, make_pool

if TYPE_CHECKING:
    from sizing.plan import Pool

PLATFORM = load_platform()


def _ctx(pool: Pool, instance_store: bool = True) -> serving.ServingContext:
    return serving_context(pool, "llmcap", "vllm", "us-east-1", WeightsLocation("bkt", "models/x/"), instance_store)


def test_multi_node_pool_becomes_a_leader_worker_set() -> None:
    pool = make_pool(name="p5-48xlarge", instance_type="p5.48xlarge", gpu="H100-SXM", tp=8, pp=2,
                     gpus_per_instance=8, nodes_per_replica=2, replicas=3, replicas_per_instance=1,
                     instances_max=8, precision="bf16", local_nvme_gb=30400)
    lws = serving.workload(pool, _ctx(pool))
    assert lws["kind"] == "LeaderWorkerSet" and lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    assert lws["spec"]["replicas"] == 3
    for t in ("leaderTemplate", "workerTemplate"):
        c = lws["spec"]["leaderWorkerTemplate"][t]["spec"]["containers"][0]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == "8"  # per node, not per replica
    assert serving.disruption_budget(pool, "llmcap")["spec"]["minAvailable"] == 2 * 2


def test_weights_load_from_nvme_or_stream_from_s3() -> None:
    nvme = make_pool(local_nvme_gb=3760, replicas_per_instance=1)
    assert loading_mode(nvme, instance_store=True) == "nvme"
    # several pods on a node stream: one copy per pod would be several per node (issue 32)
    assert loading_mode(make_pool(local_nvme_gb=3760, replicas_per_instance=4), instance_store=True) == "s3-stream"
    assert loading_mode(nvme, instance_store=False) == "s3-stream"
    assert loading_mode(make_pool(local_nvme_gb=0), instance_store=True) == "s3-stream"
    d = serving.workload(make_pool(local_nvme_gb=0), _ctx(make_pool(local_nvme_gb=0)))
    args = d["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "s3://bkt/models/x/" and "runai_streamer" in args
    d = serving.workload(nvme, _ctx(nvme))
    spec = d["spec"]["template"]["spec"]
    assert spec["containers"][0]["args"][0] == "/models/model"
    assert spec["initContainers"][0]["command"][:4] == ["aws", "s3", "sync", "s3://bkt/models/x/"]
    kubernetes_validate.validate(d, PLATFORM.kubernetes_version, strict=True)


def test_public_endpoint_needs_tls_and_source_ranges() -> None:
    opts = DeploymentOptions(public_endpoint=True,
                             tls_certificate_arn="arn:aws:acm:us-east-1:111122223333:certificate/x",
                             endpoint_allowed_cidrs=["203.0.113.0/24"])
    svc = router.service("llmcap", opts)
    ann = svc["metadata"]["annotations"]
    assert ann["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internet-facing"
    assert ann["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"].startswith("arn:aws:acm:")
    assert svc["spec"]["ports"][0]["port"] == 443
    assert svc["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    kubernetes_validate.validate(svc, PLATFORM.kubernetes_version, strict=True)
    with pytest.raises(ValueError, match="endpoint_allowed_cidrs"):  # the stack file is refused
        DeploymentOptions(public_endpoint=True, tls_certificate_arn="arn:aws:acm:us-east-1:111122223333:certificate/x")
    unchecked = DeploymentOptions.model_construct(public_endpoint=True, tls_certificate_arn="arn:x",
                                                  endpoint_allowed_cidrs=[])
    with pytest.raises(ValueError, match="endpoint_allowed_cidrs"):  # and the builder refuses too
        router.service("llmcap", unchecked)


def test_queue_threshold_follows_the_plan_ttft_headroom() -> None:
    pool = make_pool()  # predicted TTFT p95 400 ms, goodput 1.5 req/s per replica
    tight = make_plan([pool], workload={"slo": {"ttft_p95_ms": 500, "itl_p95_ms": 50}})
    loose = make_plan([pool], workload={"slo": {"ttft_p95_ms": 20400, "itl_p95_ms": 50}})
    assert queue_threshold(tight, pool) == 1  # the floor
    assert queue_threshold(loose, pool) == 15  # 20 s headroom × 1.5 req/s × share 0.5


def test_manifests_are_one_applicable_object_per_file(tmp_path: Path) -> None:
    from infra.kubernetes.manifests import write_manifests
    _, docs = rendered("dev")
    write_manifests(docs, tmp_path)
    files = sorted((tmp_path / "manifests").glob("*.yaml"))
    assert files[0].name == "00-namespace-llmcap.yaml"
    kinds = set()
    for f in files:
        objs = list(yaml.safe_load_all(f.read_text()))
        assert len(objs) == 1, f.name
        kinds.add(objs[0]["kind"])
        assert objs[0]["kind"] != "Secret", f.name
    assert {"Deployment", "ScaledObject", "PodDisruptionBudget", "Service", "Job", "PodMonitor"} <= kinds
    assert "kubectl -n llmcap create secret generic vllm-api-key --from-literal=api-key=..." in \
        (tmp_path / "secrets.md").read_text()
    helm = {p.stem for p in (tmp_path / "helm").glob("*.yaml")}
    assert {"keda", "kube-prometheus-stack", "nvidia-device-plugin"} <= helm


def test_internal_endpoint_terminates_tls_on_the_nlb_when_a_certificate_is_given() -> None:
    """Issue 18 item 13: the bearer key must not cross the VPC in cleartext when the user has a certificate;
    ACM on the internal NLB (docs/security.md says what stays plain without one)."""
    arn = "arn:aws:acm:us-east-1:111122223333:certificate/abc"
    svc = router.service("llmcap", DeploymentOptions(tls_certificate_arn=arn))
    ann = svc["metadata"]["annotations"]
    assert ann["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert ann["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] == arn
    assert ann["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] == "443"
    assert [p["port"] for p in svc["spec"]["ports"]] == [443]
    assert "loadBalancerSourceRanges" not in svc["spec"]
    plain = router.service("llmcap", DeploymentOptions())
    assert [p["port"] for p in plain["spec"]["ports"]] == [80]


def test_a_certificate_arn_must_be_an_acm_certificate() -> None:
    with pytest.raises(ValueError, match="ACM certificate ARN"):
        DeploymentOptions(tls_certificate_arn="not-an-arn")
