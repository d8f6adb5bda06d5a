"""The rules of `rules` as pulumi_policy policies. Resource rules are mandatory and see each
resource's inputs (`args.props`); two stack rules see every resource's outputs once the stack is
known: buckets have a public access block and encryption (mandatory), and the planned GPU cost
against `llmcap:budget_usd_month` (advisory). The budget comes from the stack's own config, which
the engine hands the analyzer (PULUMI_CONFIG), or from this policy's config `budget_usd_month`
(`pulumi preview --policy-pack policy --policy-pack-config cfg.json`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from llmcap_policy import rules

PACK_NAME = "llmcap"


def _resource_policy(rule: rules.ResourceRule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in rule.check(args.resource_type, args.name, args.props):
            report_violation(message, None)

    return ResourceValidationPolicy(rule.name, rule.description, validate,
                                    enforcement_level=EnforcementLevel.MANDATORY)


def _known_str(props: Mapping[str, Any], key: str) -> str | None:
    try:
        value = props.get(key)
    except UnknownValueError:  # e.g. a bucket's name during preview
        return None
    return value if isinstance(value, str) else None


def to_resource(r: PolicyResource) -> rules.Resource:
    """A stack resource in the rules' form: its URN and known id/name as `ids`, its property
    dependencies (URNs, known even in preview) as `refs`."""
    ids = {r.urn} | {v for v in (_known_str(r.props, "id"), _known_str(r.props, "bucket")) if v}
    refs = {k: frozenset(d.urn for d in deps) for k, deps in (r.property_dependencies or {}).items()}
    return rules.Resource(r.resource_type, r.name, r.props, frozenset(ids), refs)


def budget_usd_month(policy_config: Mapping[str, Any] | None) -> float | None:
    value = (policy_config or {}).get("budget_usd_month")
    if value is None:
        value = pulumi.runtime.get_config(rules.BUDGET_CONFIG_KEY)
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _buckets(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    for message in rules.check_buckets_private_and_encrypted(to_resource(r) for r in args.resources):
        report_violation(message, None)


def _budget(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    budget = budget_usd_month(args.get_config())
    for message in rules.check_stack_budget((to_resource(r) for r in args.resources), budget):
        report_violation(message, None)


def policies() -> list[Policy]:
    out: list[Policy] = [_resource_policy(r) for r in rules.RESOURCE_RULES]
    out.append(StackValidationPolicy(
        "s3-bucket-has-access-block-and-encryption",
        "Every S3 bucket has a public access block with all four flags and server-side encryption.",
        _buckets, enforcement_level=EnforcementLevel.MANDATORY))
    out.append(StackValidationPolicy(
        "gpu-budget", f"The planned monthly GPU cost stays within {rules.BUDGET_CONFIG_KEY}.", _budget,
        enforcement_level=EnforcementLevel.ADVISORY,
        config_schema=PolicyConfigSchema({"budget_usd_month": {"type": "number", "exclusiveMinimum": 0}})))
    return out
