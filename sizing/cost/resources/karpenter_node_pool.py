"""Karpenter NodePools (`llmcap:deployment.provisioner: karpenter`, infra/karpenter/nodes.py): the GPU instances a
pool runs at its planned size, priced from the GPU price table at the pool's purchase option. A NodePool has
no desired size of its own (Karpenter launches nodes for pending pods), so llmcap records the plan's figures
on it as annotations (`llmcap.io/instances-desired`, `llmcap.io/purchase`); the instance type is its
`node.kubernetes.io/instance-type` requirement and the maximum its `nvidia.com/gpu` limit over the type's GPUs."""

from __future__ import annotations

from typing import Any

from sizing.cost.resources.base import PricingContext, Resource, hourly_line
from sizing.plan import CostLine

RESOURCE_TYPES = ("kubernetes:karpenter.sh/v1:NodePool",)
DESIRED_ANNOTATION = "llmcap.io/instances-desired"
PURCHASE_ANNOTATION = "llmcap.io/purchase"
# the prices.csv purchase kind of each plan purchase: an ODCR is billed at the on-demand rate
PRICE_KIND = {"on-demand": "on-demand", "spot": "spot", "reservation": "on-demand", "capacity-block": "capacity-block"}


def _instance_type(spec: dict[str, Any]) -> str:
    for req in (spec.get("template") or {}).get("spec", {}).get("requirements") or []:
        if req.get("key") == "node.kubernetes.io/instance-type" and req.get("operator") == "In" and req.get("values"):
            return str(req["values"][0])
    return "unknown instance type"


def price(r: Resource, ctx: PricingContext) -> list[CostLine]:
    meta = r.inputs.get("metadata") or {}
    notes = meta.get("annotations") or {}
    spec = r.inputs.get("spec") or {}
    itype = _instance_type(spec)
    purchase = str(notes.get(PURCHASE_ANNOTATION, "on-demand"))
    desired = _desired(r)
    inst = ctx.catalog.instances.get(itype)
    gpu_limit = str((spec.get("limits") or {}).get("nvidia.com/gpu", ""))
    hi = int(gpu_limit) // int(inst.gpu_count) if inst and inst.gpu_count and gpu_limit.isdigit() else None
    p = ctx.catalog.price(itype, ctx.region, PRICE_KIND.get(purchase, purchase)) if inst else None
    scale = f" (max {hi})" if hi is not None else ""
    return [hourly_line(f"GPU instances ({purchase}, {itype})", desired or 0, f"instances{scale}",
                        p.usd_per_hour if p and desired is not None else None, f"prices.csv; {r.type} {r.name}")]


NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"  # its root volumes: launch_template.py


def nodes_using_node_classes(resources: list[Resource]) -> dict[str, tuple[float, tuple[str, ...]]]:
    """EC2NodeClass logical name -> (planned nodes of the NodePools that use it, those NodePools), as
    launch_template.nodes_using_templates does for node groups (a NodePool names its class by nodeClassRef)."""
    pools = [r for r in resources if r.type in RESOURCE_TYPES]
    out: dict[str, tuple[float, tuple[str, ...]]] = {}
    for nc in (r for r in resources if r.type == NODE_CLASS):
        name = (nc.inputs.get("metadata") or {}).get("name")
        users = [p for p in pools
                 if ((p.inputs.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeClassRef", {})
                 .get("name") == name]
        if users:
            nodes = sum(_desired(p) or 0 for p in users)
            out[nc.name] = (nodes, tuple(p.name for p in users))
    return out


def _desired(r: Resource) -> float | None:
    v = str(((r.inputs.get("metadata") or {}).get("annotations") or {}).get(DESIRED_ANNOTATION, ""))
    return float(v) if v.isdigit() else None

