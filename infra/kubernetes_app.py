"""The Kubernetes side of the program: one ComponentResource (`llmcap:infra:KubernetesApp`) that
stands up vLLM serving from the Plan on a cluster the AWS side created (it passes the provider
in `opts`). Children, one concern each: add-ons (NVIDIA device plugin, KEDA, kube-prometheus-stack,
LeaderWorkerSet; pinned Helm releases), the namespace and secrets, the weights copy Job, a vLLM
Deployment or LeaderWorkerSet per pool with its PodDisruptionBudget, the router behind an NLB,
KEDA ScaledObjects on queue depth, and metrics. Objects are built as plain manifests by the
pure modules (serving, router, autoscaling, observability, weights) and only created here.
"""

from __future__ import annotations

import math
import secrets as pysecrets
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra import autoscaling, netpol, observability, router, serving, settings, weights
from infra.k8s_common import API_KEY_SECRET, API_KEY_SECRET_KEY, HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY, meta
from infra.names import (
    COMPONENT_PREFIX,
    GPU_TAINT_KEY,
    ROLE_LABEL,
    WEIGHTS_LOADER_SERVICE_ACCOUNT,
    copy_job_name,
    served_checkpoints,
)
from infra.platform import load_platform
from infra.registry import ImageRefs
from sizing.plan import Plan
from sizing.stack import Stack


@dataclass
class KubernetesAppArgs:
    plan: Plan
    stack: Stack
    weights_bucket: pulumi.Input[str]
    weights_prefixes: dict[str, str]  # checkpoint (pool.vllm.model) -> its S3 prefix
    service_account_name: str
    namespace: str
    hf_token: pulumi.Input[str] | None
    api_key: pulumi.Input[str]
    # the AWS Load Balancer Controller's release (infra/addons.py): the router Service waits for it, since
    # the controller provisions its NLB (`loadBalancerClass: service.k8s.aws/nlb`)
    load_balancer_controller: pulumi.Resource | None = None
    # the registry host images are pulled from (infra/registry.py: the account's pull-through cache or the
    # user's registry); None pulls from the upstream registries (tests of this component only)
    registry_host: pulumi.Input[str] | None = None
    system_nodes: int = 0  # the system node group's desired size (Prometheus is sized for the nodes it scrapes)


def create(obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Create one manifest (camelCase, as applied) as its typed pulumi_kubernetes resource."""
    kind, md = obj["kind"], obj["metadata"]
    name = f"{kind.lower()}-{md['name']}"
    if kind == "ServiceAccount":
        return k8s.core.v1.ServiceAccount(name, metadata=md, automount_service_account_token=obj.get(
            "automountServiceAccountToken"), opts=opts)
    simple: dict[str, Any] = {
        "Namespace": k8s.core.v1.Namespace, "Service": k8s.core.v1.Service,
        "Deployment": k8s.apps.v1.Deployment, "Job": k8s.batch.v1.Job,
        "PodDisruptionBudget": k8s.policy.v1.PodDisruptionBudget,
        "NetworkPolicy": k8s.networking.v1.NetworkPolicy,
    }
    if kind in simple:
        return simple[kind](name, metadata=md, spec=obj.get("spec"), opts=opts)  # type: ignore[no-any-return]
    if kind == "ConfigMap":
        return k8s.core.v1.ConfigMap(name, metadata=md, data=obj["data"], opts=opts)
    if kind == "Secret":
        return k8s.core.v1.Secret(name, metadata=md, type=obj.get("type"), string_data=obj["stringData"],
                                  opts=opts)
    if kind == "Role":
        return k8s.rbac.v1.Role(name, metadata=md, rules=obj["rules"], opts=opts)
    if kind == "RoleBinding":
        return k8s.rbac.v1.RoleBinding(name, metadata=md, role_ref=obj["roleRef"], subjects=obj["subjects"],
                                       opts=opts)
    return k8s.apiextensions.CustomResource(name, api_version=obj["apiVersion"], kind=kind, metadata=md,
                                            spec=obj["spec"], opts=opts)


def namespace_object(name: str) -> dict[str, Any]:
    # every llmcap pod runs under the `restricted` Pod Security Standard
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(name, None, {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/audit": "restricted",
        "app.kubernetes.io/part-of": "llmcap"})}


def service_account_object(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(name, namespace)}


def secret_object(name: str, namespace: str, key: str, value: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta(name, namespace),
            "stringData": {key: value}}


def daemonset_resources(name: str) -> dict[str, Any]:
    """Requests of a DaemonSet llmcap deploys on GPU nodes, from sizing/data/node_daemonsets.csv (the
    same rows the node-allocatable model subtracts)."""
    from sizing.planning.allocatable import daemonset_request

    d = daemonset_request(name)
    return {"requests": {"cpu": f"{d.cpu_millicores}m", "memory": f"{d.memory_mib}Mi"}}


def device_plugin_values() -> dict[str, Any]:
    # the chart's default affinity wants NFD/GFD labels, which EKS GPU nodes do not carry; our
    # node groups label GPU nodes with llmcap.io/role=gpu
    return {"resources": daemonset_resources("nvidia-device-plugin"),
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ROLE_LABEL, "operator": "In", "values": ["gpu"]}]}]}}},
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]}


def _minutes(seconds: float) -> str:
    return f"{math.ceil(seconds / 60)}m"


class KubernetesApp(pulumi.ComponentResource):
    endpoint: pulumi.Output[str]

    def __init__(self, name: str, args: KubernetesAppArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(COMPONENT_PREFIX + "KubernetesApp", name, None, opts)
        plan, ns = args.plan, args.namespace
        child = pulumi.ResourceOptions(parent=self)
        platform = load_platform(args.stack.deployment)

        addons = self._addons(plan, child, args.system_nodes)
        ns_res = create(namespace_object(ns), child)
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[ns_res])
        # default deny, then only the paths the stack needs (before any pod starts)
        d = args.stack.deployment
        for pol in netpol.network_policies(plan, ns, None if d.vpc_id else d.vpc_cidr):
            create(pol, in_ns)
        accounts = [create(service_account_object(sa, ns), in_ns)
                    for sa in (args.service_account_name, WEIGHTS_LOADER_SERVICE_ACCOUNT)]
        secrets = [create(secret_object(API_KEY_SECRET, ns, API_KEY_SECRET_KEY,
                                        pulumi.Output.secret(args.api_key)), in_ns)]
        if args.hf_token is not None:
            secrets.append(create(secret_object(HF_TOKEN_SECRET, ns, HF_TOKEN_SECRET_KEY,
                                                pulumi.Output.secret(args.hf_token)), in_ns))

        bucket = pulumi.Output.from_input(args.weights_bucket)
        images = (pulumi.Output.from_input(args.registry_host).apply(ImageRefs.through)
                  if args.registry_host is not None else pulumi.Output.from_input(ImageRefs.upstream()))
        # one copy Job per checkpoint the pools serve, on a node of the first pool serving it
        checkpoints = served_checkpoints(plan.pools)
        jobs: dict[str, pulumi.Resource] = {}
        for ckpt in checkpoints:
            host = next(p for p in plan.pools if p.vllm.model == ckpt)
            job_name = copy_job_name(ckpt, checkpoints)
            where = args.weights_prefixes[ckpt]
            job_spec = pulumi.Output.all(bucket, images).apply(
                lambda a, ckpt=ckpt, host=host, where=where, job_name=job_name: weights.copy_job(
                    ns, ckpt, weights.WeightsLocation(a[0], where), args.stack.region, host, platform,
                    with_hf_token=args.hf_token is not None, name=job_name, revision=host.checkpoint_revision,
                    images=a[1])["spec"])
            # Pulumi waits for the Job to complete before the serving pods that read its output
            job_opts = pulumi.ResourceOptions(parent=self, depends_on=[*secrets, *accounts, addons["device"]],
                                              custom_timeouts=pulumi.CustomTimeouts(create="360m", update="360m"))
            jobs[ckpt] = k8s.batch.v1.Job(f"job-{job_name}", metadata=meta(job_name, ns), spec=job_spec,
                                          opts=job_opts)
        for pool in plan.pools:
            self._pool(args, pool, bucket, images, platform, jobs[pool.vllm.model], addons, in_ns)

        create(router.service_account(ns), in_ns)
        create(router.role(ns), in_ns)
        create(router.role_binding(ns), in_ns)
        router_obj = router.deployment(ns)
        router_obj["spec"] = images.apply(lambda i: router.deployment(ns, i.router)["spec"])
        create(router_obj, pulumi.ResourceOptions(parent=self, depends_on=[ns_res, *secrets]))
        create(router.disruption_budget(ns), in_ns)
        lbc = [args.load_balancer_controller] if args.load_balancer_controller is not None else []
        svc = create(router.service(ns, args.stack.deployment),
                     pulumi.ResourceOptions(parent=self, depends_on=[ns_res, *lbc]))

        create(observability.pod_monitor(ns), pulumi.ResourceOptions(parent=self, depends_on=[ns_res,
                                                                                               addons["metrics"]]))
        create(observability.dashboard_config_map(plan, ns), in_ns)

        scheme = "https" if args.stack.deployment.tls_certificate_arn else "http"
        self.endpoint = svc.status.apply(lambda s: _endpoint(scheme, s))  # type: ignore[attr-defined]
        self.register_outputs({"endpoint": self.endpoint})

    def _addons(self, plan: Plan, child: pulumi.ResourceOptions, system_nodes: int = 0) -> dict[str, pulumi.Resource]:
        def release(key: str, values: dict[str, Any], depends_on: list[pulumi.Resource] | None = None
                    ) -> k8s.helm.v3.Release:
            c = settings.chart(key)
            return k8s.helm.v3.Release(
                c.name, name=c.name, chart=c.chart, version=c.version, namespace=c.namespace,
                create_namespace=not depends_on, values=values,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=c.repo) if c.repo else None,
                opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on or []))

        metrics_ns = settings.chart("kube_prometheus_stack").namespace
        mon = k8s.core.v1.Namespace(f"namespace-{metrics_ns}", metadata=meta(metrics_ns, None), opts=child)
        # generated once; later runs keep the first value (ignore_changes), so Grafana's login is stable
        admin = create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                        "metadata": meta(observability.GRAFANA_ADMIN_SECRET, metrics_ns),
                        "stringData": {"admin-user": "admin",
                                       "admin-password": pulumi.Output.secret(pysecrets.token_urlsafe(24))}},
                       pulumi.ResourceOptions(parent=self, depends_on=[mon], ignore_changes=["stringData"]))
        out: dict[str, pulumi.Resource] = {
            "device": release("nvidia_device_plugin", device_plugin_values()),
            "keda": release("keda", {}),
            "metrics": release("kube_prometheus_stack", observability.kube_prometheus_values(plan, system_nodes),
                               depends_on=[mon, admin]),
        }
        if any(p.nodes_per_replica > 1 for p in plan.pools):
            out["lws"] = release("leaderworkerset", {})
        return out

    def _pool(self, args: KubernetesAppArgs, pool: Any, bucket: pulumi.Output[str],
              images: pulumi.Output[ImageRefs], platform: Any,
              job: pulumi.Resource, addons: dict[str, pulumi.Resource], in_ns: pulumi.ResourceOptions) -> None:
        ns = args.namespace

        def build(b: str, refs: ImageRefs) -> dict[str, Any]:
            ctx = serving.ServingContext(ns, args.service_account_name, args.stack.region,
                                         weights.WeightsLocation(b, args.weights_prefixes[pool.vllm.model]), platform,
                                         args.stack.deployment.model_cache_on_instance_store, images=refs)
            return serving.workload(pool, ctx)

        shape = build("bucket", ImageRefs.upstream())  # kind and metadata depend on neither
        spec = pulumi.Output.all(bucket, images).apply(lambda a: build(a[0], a[1])["spec"])
        deps: list[pulumi.Resource] = [job, addons["device"]] + ([addons["lws"]] if "lws" in addons else [])
        mode = weights.loading_mode(pool, platform, args.stack.deployment.model_cache_on_instance_store)
        wait = _minutes(serving.rollout_budget_s(pool, mode) + 600)  # node boot + image + S3 sync + startup
        opts = pulumi.ResourceOptions(parent=self, depends_on=deps, ignore_changes=["spec.replicas"],
                                      custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait))
        if shape["kind"] == "Deployment":
            k8s.apps.v1.Deployment(f"deployment-{shape['metadata']['name']}", metadata=shape["metadata"],
                                   spec=spec, opts=opts)
        else:
            k8s.apiextensions.CustomResource(f"leaderworkerset-{shape['metadata']['name']}",
                                             api_version=shape["apiVersion"], kind=shape["kind"],
                                             metadata=shape["metadata"], spec=spec, opts=opts)
        create(serving.disruption_budget(pool, ns), in_ns)
        create(autoscaling.scaled_object(args.plan, pool, ns),
               pulumi.ResourceOptions(parent=self, depends_on=[*(in_ns.depends_on or []),  # type: ignore[misc]
                                                               addons["keda"], addons["metrics"]]))


def _endpoint(scheme: str, status: Any) -> str:
    ingress = getattr(getattr(status, "load_balancer", None), "ingress", None) if status else None
    if not ingress:
        return "pending: the load balancer has no address yet"
    host = ingress[0].hostname or ingress[0].ip
    return f"{scheme}://{host}"
