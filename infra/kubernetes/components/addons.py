"""Cluster add-ons the serving stack relies on, as pinned Helm releases on the system node group
(`llmcap:infra:ClusterAddons`, created with the cluster's Kubernetes provider):

- AWS Load Balancer Controller: provisions the router's NLB (`loadBalancerClass: service.k8s.aws/nlb`).
  Its IAM role and Pod Identity association are the cluster's (infra/aws/cluster.py).
- Cluster Autoscaler: resizes the GPU node groups' Auto Scaling groups when KEDA adds replicas up to the
  plan's replicas_max (and removes idle nodes again), auto-discovering the groups by their tags
  (infra/aws/nodegroups.py). Its IAM role is infra/aws/addons_iam.py.

Versions and sources: infra/data/versions.yaml. The values are built by pure functions (tested)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.config import settings
from infra.config.image_lock import ImagePins
from infra.config.names import (
    CLUSTER_AUTOSCALER_SERVICE_ACCOUNT,
    COMPONENT_PREFIX,
    LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT,
    ROLE_LABEL,
)
from infra.config.registry import prefix as registry_prefix

LOAD_BALANCER_CONTROLLER_CHART = "aws_load_balancer_controller"
CLUSTER_AUTOSCALER_CHART = "cluster_autoscaler"
SYSTEM_NODES = {ROLE_LABEL: "system"}  # the untainted CPU node group (infra/aws/cluster.py)


def chart_image_values(key: str, registry_host: str | None, pins: ImagePins | None) -> dict[str, Any]:
    """`<values_key>.repository` and `.tag` of the chart's image through the pull-through cache (values_key
    `image` unless versions.yaml says otherwise), the tag with its locked digest (`v1.35.0@sha256:...`:
    each chart writes "repository:tag", versions.yaml), or {} for the chart's default (tests only)."""
    if registry_host is None or pins is None or settings.chart_image_pin(key) is None:
        return {}
    img = pins.image(key)
    values: dict[str, Any] = {"repository": f"{registry_host}/{registry_prefix(img.registry)}/{img.image}",
                              "tag": img.pin[1:]}
    for part in reversed(settings.chart_image_values_key(key).split(".")):  # e.g. image.manager (LWS)
        values = {part: values}
    return values


def load_balancer_controller_values(cluster_name: str, vpc_id: str, region: str,
                                    registry_host: str | None = None, pins: ImagePins | None = None
                                    ) -> dict[str, Any]:
    return {
        **chart_image_values(LOAD_BALANCER_CONTROLLER_CHART, registry_host, pins),
        "clusterName": cluster_name,
        "region": region,  # explicit: no IMDS lookup needed
        "vpcId": vpc_id,
        # the chart creates the account; its AWS permissions come from the Pod Identity association
        "serviceAccount": {"create": True, "name": LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT},
        "nodeSelector": SYSTEM_NODES,
        # llmcap's Services name their loadBalancerClass; without this webhook, creating any Service does
        # not depend on the controller's pods being up
        "enableServiceMutatorWebhook": False,
    }


def cluster_autoscaler_values(cluster_name: str, region: str, registry_host: str | None = None,
                              pins: ImagePins | None = None) -> dict[str, Any]:
    return {
        **chart_image_values(CLUSTER_AUTOSCALER_CHART, registry_host, pins),
        "cloudProvider": "aws",
        "awsRegion": region,
        # --node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/<name>
        "autoDiscovery": {"clusterName": cluster_name},
        "rbac": {"serviceAccount": {"create": True, "name": CLUSTER_AUTOSCALER_SERVICE_ACCOUNT}},
        "nodeSelector": SYSTEM_NODES,
    }


@dataclass
class ClusterAddonsArgs:
    cluster_name: pulumi.Input[str]
    vpc_id: pulumi.Input[str]
    region: str
    # what every release waits for: system nodes, core add-ons, the add-ons' Pod Identity associations
    # (EKS injects credentials at pod creation, so an association must exist before the pod starts)
    after: list[pulumi.Resource] = field(default_factory=list)
    registry_host: pulumi.Input[str] | None = None  # the pull-through cache (infra/aws/ecr.py); None: chart defaults
    image_pins: ImagePins | None = None  # the locked digests (infra/config/image_lock.py), with registry_host
    cluster_autoscaler: bool = True  # False when Karpenter launches every GPU pool (infra/karpenter/nodes.py)


class ClusterAddons(pulumi.ComponentResource):
    load_balancer_controller: k8s.helm.v3.Release
    cluster_autoscaler: k8s.helm.v3.Release | None

    def __init__(self, name: str, args: ClusterAddonsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{COMPONENT_PREFIX}ClusterAddons", name, None, opts)
        lbc_values = pulumi.Output.all(args.cluster_name, args.vpc_id, args.registry_host).apply(
            lambda a: load_balancer_controller_values(a[0], a[1], args.region, a[2], args.image_pins))
        self.load_balancer_controller = self._release(LOAD_BALANCER_CONTROLLER_CHART, lbc_values, args.after)
        self.cluster_autoscaler = None
        outputs = {"loadBalancerController": self.load_balancer_controller.status}
        if args.cluster_autoscaler:
            ca_values = pulumi.Output.all(args.cluster_name, args.registry_host).apply(
                lambda a: cluster_autoscaler_values(a[0], args.region, a[1], args.image_pins))
            self.cluster_autoscaler = self._release(CLUSTER_AUTOSCALER_CHART, ca_values, args.after)
            outputs["clusterAutoscaler"] = self.cluster_autoscaler.status
        self.register_outputs(outputs)

    def _release(self, key: str, values: pulumi.Input[dict[str, Any]], after: list[pulumi.Resource]
                 ) -> k8s.helm.v3.Release:
        c = settings.chart(key)
        return k8s.helm.v3.Release(
            c.name, name=c.name, chart=c.chart, version=c.version, namespace=c.namespace,
            create_namespace=False, values=values,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=c.repo),
            opts=pulumi.ResourceOptions(parent=self, depends_on=after))
