"""The Kubernetes side of the program: `llmcap:infra:KubernetesApp`, the parent of one component
per concern (infra/kubernetes/components/): a `ServingPool` per plan pool, the `Router` behind its NLB,
`Observability` (kube-prometheus-stack, the PodMonitor, the dashboard) and a `WeightsJob` per
checkpoint. The app itself keeps what the others share: the serving namespace (restricted Pod
Security), its NetworkPolicies, service accounts and Secrets, and the cluster add-ons (NVIDIA device
plugin, KEDA, LeaderWorkerSet; pinned Helm releases). It runs on the cluster the AWS side created
(the provider arrives in `opts`). Objects are built as plain manifests by the pure modules and only
created here; the components' children carry aliases to the URNs they had as the app's own children.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s

from infra.config import settings
from infra.config.efa_cards import efa_per_pod
from infra.config.image_lock import ImagePins
from infra.config.names import (
    COMPONENT_PREFIX,
    DO_NOT_DISRUPT,
    GPU_TAINT_KEY,
    ROLE_LABEL,
    WEIGHTS_LOADER_SERVICE_ACCOUNT,
    copy_job_name,
    served_checkpoints,
)
from infra.config.platform import load_platform
from infra.config.registry import ImageRefs
from infra.kubernetes import autoscaling, efa_plugin, netpol, smoke
from infra.kubernetes import router as router_module
from infra.kubernetes.app_objects import namespace_object, secret_object, service_account_object
from infra.kubernetes.components import apply
from infra.kubernetes.components.addons import chart_image_values
from infra.kubernetes.components.observability import Observability, ObservabilityArgs
from infra.kubernetes.components.pool import ServingPool, ServingPoolArgs
from infra.kubernetes.components.router import Router, RouterArgs
from infra.kubernetes.components.smoke_job import SmokeJob, SmokeJobArgs
from infra.kubernetes.components.weights_job import WeightsJob, WeightsJobArgs
from infra.kubernetes.k8s_common import API_KEY_SECRET, API_KEY_SECRET_KEY, HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY
from infra.kubernetes.observability import duration_s
from infra.kubernetes.serving import rollout_timeout_s
from sizing.perf.cold_start import before_engine_s
from sizing.planning.allocatable import daemonset_request
from sizing.planning.metrics_storage import prometheus_volume
from sizing.planning.node_storage import loading_mode
from sizing.planning.system_nodes import system_pods

if TYPE_CHECKING:
    from sizing.deployment import DeploymentOptions
    from sizing.plan import Plan

__all__ = ["KubernetesApp", "KubernetesAppArgs", "dcgm_exporter_values", "device_plugin_values", "prometheus_requests"]


# ---------------------------------------------------------------- figures the components read, from sizing/data
# (resolved here once, so the manifest builders below stay free of sizing's tables)

def prometheus_requests(plan: Plan | None, system_nodes: int) -> dict[str, str]:
    """Prometheus's requests as the system node group was sized for them (sizing/data/system_pods.csv):
    a base plus a share per scraped node (GPU nodes at the pools' max and the system nodes)."""
    pods = system_pods()
    nodes = (sum(p.instances_max for p in plan.pools) if plan else 0) + system_nodes
    base, per = pods["prometheus"], pods["prometheus_per_node"]
    return {"cpu": f"{base.cpu_m + per.cpu_m * nodes}m", "memory": f"{base.memory_mib + per.memory_mib * nodes}Mi"}



def daemonset_resources(name: str) -> dict[str, Any]:
    """Requests of a DaemonSet llmcap deploys on GPU nodes, from sizing/data/node_daemonsets.csv (the
    same rows the node-allocatable model subtracts)."""
    d = daemonset_request(name)
    return {"requests": {"cpu": f"{d.cpu_millicores}m", "memory": f"{d.memory_mib}Mi"}}



def device_plugin_values() -> dict[str, Any]:
    # the chart's default affinity wants NFD/GFD labels, which EKS GPU nodes do not carry; our
    # node groups label GPU nodes with llmcap.io/role=gpu
    return {"resources": daemonset_resources("nvidia-device-plugin"),
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ROLE_LABEL, "operator": "In", "values": ["gpu"]}]}]}}},
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]}


def gpu_node_scheduling() -> dict[str, Any]:
    """On GPU nodes only: our node groups label them llmcap.io/role=gpu and taint them nvidia.com/gpu."""
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ROLE_LABEL, "operator": "In", "values": ["gpu"]}]}]}}},
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]}


def dcgm_exporter_values() -> dict[str, Any]:
    """NVIDIA's DCGM exporter on every GPU node: GPU utilisation and memory for the dashboard. Its ServiceMonitor
    keeps the exporter's own `pod`/`namespace` labels, which name the pod holding each GPU (honorLabels), so
    the dashboard can select a pool's GPUs; its requests are the ones the node model subtracts."""
    return {"resources": daemonset_resources("dcgm-exporter"), **gpu_node_scheduling(),
            "serviceMonitor": {"enabled": True, "interval": settings.policy().observability.scrape_interval,
                               "honorLabels": True}}


@dataclass
class KubernetesAppArgs:
    plan: Plan
    region: str
    deployment: DeploymentOptions  # llmcap:deployment (VPC, NLB, TLS, instance-store cache)
    weights_bucket: pulumi.Input[str]
    weights_prefixes: dict[str, str]  # checkpoint (pool.vllm.model) -> its S3 prefix
    service_account_name: str
    namespace: str
    hf_token: pulumi.Input[str] | None
    api_key: pulumi.Input[str]
    # the AWS Load Balancer Controller's release (infra/kubernetes/components/addons.py): the router Service waits
    # for it, since
    # the controller provisions its NLB (`loadBalancerClass: service.k8s.aws/nlb`)
    load_balancer_controller: pulumi.Resource | None = None
    # the registry host images are pulled from (infra/config/registry.py: the account's pull-through cache or the
    # user's registry); None pulls from the upstream registries (tests of this component only)
    registry_host: pulumi.Input[str] | None = None
    # the locked image digests (infra/config/image_lock.py), with registry_host; None: tags (tests only)
    image_pins: ImagePins | None = None
    system_nodes: int = 0  # the system node group's desired size (Prometheus is sized for the nodes it scrapes)
    # the endpoint certificate the deployment created (infra/aws/endpoint_certificate.py); None: the stack's own
    # tls_certificate_arn, or plain HTTP with allow_plain_http_endpoint
    certificate_arn: pulumi.Input[str] | None = None
    system_nodes_max: int = 0  # its max (Prometheus's volume holds the series of the cluster at its largest)


class KubernetesApp(pulumi.ComponentResource):
    endpoint: pulumi.Output[str]

    def __init__(self, name: str, args: KubernetesAppArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(COMPONENT_PREFIX + "KubernetesApp", name, None, opts)
        plan, ns, d = args.plan, args.namespace, args.deployment
        child = pulumi.ResourceOptions(parent=self)

        addons = self._addons(plan, child, args)
        ns_res = apply.create(namespace_object(ns), child)
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[ns_res])
        # default deny, then only the paths the stack needs (before any pod starts)
        policies = [apply.create(pol, in_ns)
                    for pol in netpol.network_policies(plan, ns, load_platform(d).service_ipv4_cidr)]
        accounts = [apply.create(service_account_object(sa, ns), in_ns)
                    for sa in (args.service_account_name, WEIGHTS_LOADER_SERVICE_ACCOUNT)]
        secrets = [apply.create(secret_object(API_KEY_SECRET, ns, API_KEY_SECRET_KEY,
                                              pulumi.Output.secret(args.api_key)), in_ns)]
        if args.hf_token is not None:
            secrets.append(apply.create(secret_object(HF_TOKEN_SECRET, ns, HF_TOKEN_SECRET_KEY,
                                                      pulumi.Output.secret(args.hf_token)), in_ns))

        pins = args.image_pins
        images = (pulumi.Output.from_input(args.registry_host).apply(lambda h: ImageRefs.through(h, pins))
                  if args.registry_host is not None and pins is not None
                  else pulumi.Output.from_input(ImageRefs.upstream()))
        part = pulumi.ResourceOptions(parent=self)
        o = settings.policy().observability
        volume = prometheus_volume(plan, args.system_nodes_max or args.system_nodes,
                                   duration_s(o.retention), duration_s(o.scrape_interval))
        observability = Observability(f"{name}-observability", ObservabilityArgs(
            plan=plan, namespace=ns, namespace_ready=[ns_res],
            prometheus_requests=prometheus_requests(plan, args.system_nodes),
            node_exporter=daemonset_resources("prometheus-node-exporter"), volume_gib=volume.volume_gib,
            retention_size_gib=volume.retention_size_gib, volume_type=load_platform(d).root_volume_type), part)

        # one copy Job per checkpoint the pools serve, on a node of the first pool serving it
        checkpoints = served_checkpoints(plan.pools)
        jobs: dict[str, pulumi.Resource] = {}
        for ckpt in checkpoints:
            job_name = copy_job_name(ckpt, checkpoints)
            jobs[ckpt] = WeightsJob(f"{name}-{job_name}", WeightsJobArgs(
                namespace=ns, checkpoint=ckpt, job_name=job_name,
                host=next(p for p in plan.pools if p.vllm.model == ckpt), region=args.region,
                weights_bucket=args.weights_bucket, weights_prefix=args.weights_prefixes[ckpt],
                images=images, with_hf_token=args.hf_token is not None,
                after=[*secrets, *accounts, addons["device"]]), part).job

        workloads: list[pulumi.Resource] = []
        timeouts: list[int] = []
        for pool in plan.pools:
            mode = loading_mode(pool, d.model_cache_on_instance_store)
            timeouts.append(rollout_timeout_s(pool, before_engine_s(pool, mode)))
            workloads.append(ServingPool(f"{name}-{pool.name}", ServingPoolArgs(
                pool=pool, namespace=ns, service_account_name=args.service_account_name, region=args.region,
                weights_mode=mode, before_engine_s=before_engine_s(pool, mode),
                weights_bucket=args.weights_bucket, weights_prefix=args.weights_prefixes[pool.vllm.model],
                images=images, queue_threshold=autoscaling.queue_threshold(plan, pool),
                min_replicas=autoscaling.min_replicas(plan, pool),
                weights_job=jobs[pool.vllm.model], device_plugin=addons["device"], namespace_ready=[ns_res],
                keda=addons["keda"], metrics=observability.metrics, leader_worker_set=addons.get("lws"),
                efa_device_plugin=addons.get("efa") if efa_per_pod(pool) else None,
                pod_annotations=dict(DO_NOT_DISRUPT) if d.provisioner == "karpenter" else {}),
                part).workload)

        router = Router(f"{name}-router", RouterArgs(
            namespace=ns, options=d, images=images, namespace_ready=[ns_res], secrets=secrets,
            load_balancer_controller=args.load_balancer_controller, certificate_arn=args.certificate_arn,
            engines=workloads,
            ready_timeout_s=max(timeouts, default=0) or None), part)
        # the deployment's last step: one answered request per served model through the router
        SmokeJob(f"{name}-smoke", SmokeJobArgs(
            plan=plan, namespace=ns, url=smoke.router_url(
                router_module.NAME, ns, router_module.service_port(ns, d, args.certificate_arn is not None)),
            wait_s=smoke.deadline_s(timeouts), images=images,
            after=[*workloads, router.deployment, router.service, *secrets, *policies]), part)
        self.endpoint = router.endpoint
        self.register_outputs({"endpoint": self.endpoint})

    def _addons(self, plan: Plan, child: pulumi.ResourceOptions, args: KubernetesAppArgs
                ) -> dict[str, pulumi.Resource]:
        """The cluster add-ons every pool needs (kube-prometheus-stack is Observability's); a chart whose
        image versions.yaml pins comes through the registry cache at its locked digest
        (infra/kubernetes/components/addons.py)."""
        def release(key: str, values: pulumi.Input[dict[str, Any]]) -> k8s.helm.v3.Release:
            c = settings.chart(key)
            return k8s.helm.v3.Release(
                c.name, name=c.name, chart=c.chart, version=c.version, namespace=c.namespace,
                create_namespace=True, values=values,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=c.repo) if c.repo else None, opts=child)

        out: dict[str, pulumi.Resource] = {
            "device": release("nvidia_device_plugin", device_plugin_values()),
            "keda": release("keda", {}),
            "dcgm": release("dcgm_exporter", dcgm_exporter_values()),
        }
        efa_types = efa_plugin.plugin_instance_types(plan)
        if efa_types:
            out["efa"] = release(efa_plugin.KEY, efa_plugin.device_plugin_values(args.region, efa_types))
        if any(p.nodes_per_replica > 1 for p in plan.pools):
            pins, host = args.image_pins, args.registry_host
            lws_values: pulumi.Input[dict[str, Any]] = (
                pulumi.Output.from_input(host).apply(lambda h: chart_image_values("leaderworkerset", h, pins))
                if host is not None and pins is not None else {})
            out["lws"] = release("leaderworkerset", lws_values)
        return out
