"""Launch templates: no charge of their own, but the EBS volumes they declare are billed per node that
uses them. The node count lives on the node groups that refer to the template, so `price_resources`
first joins each template with those node groups (`nodes_using_templates`); a template's gp3 volumes are
then priced as "Node root volumes (EBS gp3)" at the node groups' desired size, the same line the plan
prices from its node count. A template no node group is found for shows its volumes per node, not priced.

A node group refers to its template by `launchTemplate.id` (or `.name`), which a preview of a new stack
does not know yet; the join takes, in order: a reference equal to the template's `name` input; a
reference that is the template's logical name plus Pulumi's auto-name suffix (`<name>-<hex>`: the ids
`llmcap render` mocks, and auto-named physical names); llmcap's own naming, where node group `X` uses
template `X-lt` (infra/aws/nodegroups.py, infra/aws/cluster.py)."""

from __future__ import annotations

import re

from sizing.cost.resources.base import PricingContext, Resource, num, platform_price
from sizing.plan import CostLine

# a Karpenter EC2NodeClass declares its nodes' volumes the same way (spec.blockDeviceMappings, volumeSize a
# quantity such as 30Gi); its node count is on the NodePools using it (karpenter_node_pool.nodes_using_node_classes)
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
RESOURCE_TYPES = ("aws:ec2/launchTemplate:LaunchTemplate", NODE_CLASS)
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
GB_PER_GIB = 2**30 / 1e9
_SUFFIX = re.compile(r"-[0-9a-f]{7,}$")


def _uses(ng: Resource, lt: Resource) -> bool:
    ref = ng.inputs.get("launchTemplate") or {}
    refs = [str(v) for v in (ref.get("id"), ref.get("name")) if isinstance(v, str) and v]
    named = lt.inputs.get("name")
    if isinstance(named, str) and named in refs:
        return True
    if any(_SUFFIX.sub("", v) == lt.name for v in refs):
        return True
    return f"{ng.name}-lt" == lt.name


def nodes_using_templates(resources: list[Resource]) -> dict[str, tuple[float, tuple[str, ...]]]:
    """Template logical name -> (desired nodes summed over the node groups using it, those node groups)."""
    groups = [r for r in resources if r.type == NODE_GROUP]
    out: dict[str, tuple[float, tuple[str, ...]]] = {}
    for lt in (r for r in resources if r.type in RESOURCE_TYPES):
        users = [g for g in groups if _uses(g, lt)]
        if users:
            sc = [g.inputs.get("scalingConfig") or {} for g in users]
            nodes = sum(num(s.get("desiredSize"), num(s.get("minSize"), 0.0)) or 0.0 for s in sc)
            out[lt.name] = (nodes, tuple(g.name for g in users))
    return out


def instance_types_from_templates(resources: list[Resource]) -> dict[str, str]:
    """Node group logical name -> the instanceType of the launch template it uses, where the template sets one."""
    groups = [r for r in resources if r.type == NODE_GROUP]
    out: dict[str, str] = {}
    for lt in (r for r in resources if r.type in RESOURCE_TYPES):
        t = lt.inputs.get("instanceType")
        if isinstance(t, str) and t:
            out.update({g.name: t for g in groups if _uses(g, lt)})
    return out


def _gib(v: object) -> float | None:
    """A volume size in GiB: a number (launch template) or a Kubernetes quantity in Gi (EC2NodeClass)."""
    if isinstance(v, str) and v.endswith("Gi") and v[:-2].isdigit():
        return float(v[:-2])
    return num(v)


def price(r: Resource, ctx: PricingContext) -> list[CostLine]:
    where = (r.inputs.get("spec") or {}) if r.type == NODE_CLASS else r.inputs
    vols = [(m.get("ebs") or {}) for m in where.get("blockDeviceMappings") or [] if isinstance(m, dict)]
    sizes = [(_gib(v.get("volumeSize")), str(v.get("volumeType") or "")) for v in vols]
    if not sizes:
        return []
    gib = sum(s for s, _ in sizes if s is not None)
    used = ctx.template_nodes.get(r.name)
    gp3 = all(t == "gp3" for _, t in sizes) and all(s is not None for s, _ in sizes)
    if used is None or not gp3:
        why = "billed per node; node count is on the node group (see the plan's root volume line)" if used is None \
            else "billed per node; only gp3 has a catalog price"
        return [CostLine(name=f"Node volumes (launch template {r.name})", quantity=round(gib * GB_PER_GIB, 1),
                         unit="GB per node", usd_per_month=None, source=why)]
    nodes, groups = used
    gb = round(gib * GB_PER_GIB * nodes, 1)
    usd = platform_price(ctx, "EBS gp3 storage")
    return [CostLine(name="Node root volumes (EBS gp3)", quantity=gb, unit="GB",
                     usd_per_month=None if usd is None else round(usd * gb, 2),
                     source=f"platform_prices.csv; {r.type} {r.name} on {nodes:g} nodes of {', '.join(groups)}")]
