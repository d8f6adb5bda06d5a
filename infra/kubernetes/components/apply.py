"""Create plain manifests as pulumi_kubernetes resources, and the base of the components split out
of KubernetesApp (issue 15): their children carry an alias to the URN they had as the app's own
children, so `pulumi up` on a stack deployed before the split moves them in the state instead of
deleting and re-creating them (a replaced Deployment would drop the endpoint's pods)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.config.names import COMPONENT_PREFIX


def create(obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Create one manifest (camelCase, as applied) as its typed pulumi_kubernetes resource, named
    `<kind>-<metadata.name>` (the name is part of its URN: keep it)."""
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
        created: pulumi.CustomResource = simple[kind](name, metadata=md, spec=obj.get("spec"), opts=opts)
        return created
    if kind == "StorageClass":
        return k8s.storage.v1.StorageClass(
            name, metadata=md, provisioner=obj["provisioner"], parameters=obj.get("parameters"),
            volume_binding_mode=obj.get("volumeBindingMode"), allow_volume_expansion=obj.get("allowVolumeExpansion"),
            reclaim_policy=obj.get("reclaimPolicy"), opts=opts)
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


class MovedOutOfApp(pulumi.ComponentResource):
    """A component whose children were direct children of its parent (the KubernetesApp) before
    issue 15 split the app. `child()` gives each child `Alias(parent=<the app>)`: the alias keeps the
    child's name and type and names the old parent, i.e. the old URN
    `urn:pulumi:<stack>::<project>::llmcap:infra:KubernetesApp$<type>::<name>` (pulumi.Alias: "parent:
    the previous parent of the resource"; unset name/type mean the current ones)."""

    def __init__(self, kind: str, name: str, opts: pulumi.ResourceOptions | None) -> None:
        super().__init__(COMPONENT_PREFIX + kind, name, None, opts)
        self._old_parent = opts.parent if opts is not None else None

    def child(self, depends_on: Sequence[pulumi.Resource] = (), **options: Any) -> pulumi.ResourceOptions:
        """Options for a child: this component as parent, the alias to the old parent, `depends_on`,
        and any other ResourceOptions field (custom_timeouts, ignore_changes)."""
        aliases: list[pulumi.Input[str | pulumi.Alias]] = \
            [pulumi.Alias(parent=self._old_parent)] if self._old_parent is not None else []
        return pulumi.ResourceOptions(parent=self, depends_on=list(depends_on), aliases=aliases, **options)
