"""Resource-level pricing of a Pulumi program: `llmcap render`'s resources.json or a real
`pulumi preview --json` file, priced from the catalog (Infracost-style).

One small module per priced resource type (`RESOURCE_TYPES` + `price(resource, ctx)`), all
returning `CostLine`s over one schema. A price is always a catalog lookup; a resource whose
price is not in the catalog (or depends on usage) is a line with `usd_per_month=None` ("not
priced"), never $0. Types known to carry no charge of their own are skipped (`free.py`).
Must not import pulumi or boto3.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from sizing.cost.resources.base import PriceFn, PricingContext, Resource
from sizing.errors import SpecError
from sizing.plan import CostLine


def registry() -> dict[str, PriceFn]:
    from sizing.cost.resources import (
        cloudwatch_log_group,
        ebs_volume,
        eip,
        eks_cluster,
        eks_node_group,
        karpenter_node_pool,
        launch_template,
        load_balancer,
        nat_gateway,
        s3_bucket,
    )

    out: dict[str, PriceFn] = {}
    for mod in (eks_cluster, eks_node_group, karpenter_node_pool, launch_template, nat_gateway, eip, load_balancer,
                ebs_volume, s3_bucket, cloudwatch_log_group):
        for t in mod.RESOURCE_TYPES:
            out[t] = mod.price
    return out


def _stack_of_urn(urn: str) -> str | None:
    # urn:pulumi:<stack>::<project>::<type>::<name>
    parts = urn.split("::")
    head = parts[0].split(":") if parts else []
    return head[2] if len(head) >= 3 and head[0] == "urn" else None


def load_resources(path: Path) -> list[Resource]:
    """Resources from a `pulumi preview --json` file (steps[].newState) or a resources.json list."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SpecError(f"{path}: not a JSON file ({e.__class__.__name__})") from None
    out: list[Resource] = []
    if isinstance(doc, dict) and isinstance(doc.get("steps"), list):
        for step in doc["steps"]:
            if not isinstance(step, dict) or step.get("op") in ("delete", "discard", "read"):
                continue
            st = step.get("newState") or {}
            urn = str(st.get("urn") or step.get("urn") or "")
            if st.get("custom") is False or not st.get("type"):
                continue  # components and the stack itself are not billed
            out.append(Resource(type=str(st["type"]), name=urn.rsplit("::", 1)[-1], inputs=st.get("inputs") or {},
                                stack=_stack_of_urn(urn)))
        return out
    if isinstance(doc, list):
        for r in doc:
            if isinstance(r, dict) and "type" in r:
                out.append(Resource(type=str(r["type"]), name=str(r.get("name", "")), inputs=r.get("inputs") or {}))
        return out
    raise SpecError(f"{path}: expected `pulumi preview --json` output (with steps) or a list of resources")


def price_resources(resources: list[Resource], ctx: PricingContext) -> list[CostLine]:
    """Cost lines for every billable resource; unknown billable types show as not priced."""
    from sizing.cost.resources.free import is_free
    from sizing.cost.resources.karpenter_node_pool import nodes_using_node_classes
    from sizing.cost.resources.launch_template import instance_types_from_templates, nodes_using_templates

    reg = registry()
    ctx = replace(ctx, template_nodes={**nodes_using_templates(resources), **nodes_using_node_classes(resources)},
                  group_instance_types=instance_types_from_templates(resources))
    lines: list[CostLine] = []
    for r in resources:
        fn = reg.get(r.type)
        if fn is not None:
            lines.extend(fn(r, ctx))
        elif not is_free(r.type):
            lines.append(CostLine(name=f"{r.type} ({r.name})", quantity=1, unit="resource", usd_per_month=None,
                                  source="no pricing rule for this resource type"))
    return lines
