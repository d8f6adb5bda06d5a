"""Pulumi entry point (`main: infra/` in Pulumi.yaml): read `llmcap:*` config once, validate it,
plan, build the components, export the plan summary."""

from __future__ import annotations

import sys
from pathlib import Path

# Pulumi runs this directory as the program; make `import sizing` / `import infra.x` work even
# without the editable install
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import pulumi  # noqa: E402

from infra.program import Secrets, build_program  # noqa: E402
from sizing.catalog import load_catalog  # noqa: E402
from sizing.errors import LlmcapError  # noqa: E402
from sizing.planner import plan_stack  # noqa: E402
from sizing.stack import NAMESPACE, stack_from_config  # noqa: E402
from sizing.weights_source import require_weights_source  # noqa: E402

CONFIG_OBJECTS = ("workload", "hardware", "deployment")


def read_config() -> tuple[dict[str, object], Secrets]:
    """The llmcap config as the mapping `stack_from_config` validates, and the secrets."""
    cfg = pulumi.Config(NAMESPACE)
    mapping: dict[str, object] = {"aws:region": pulumi.Config("aws").get("region") or None}
    if mapping["aws:region"] is None:
        del mapping["aws:region"]
    for key in CONFIG_OBJECTS:
        value = cfg.get_object(key)
        if value is not None:
            mapping[f"{NAMESPACE}:{key}"] = value
    budget = cfg.get_float("budget_usd_month")
    if budget is not None:
        mapping[f"{NAMESPACE}:budget_usd_month"] = budget
    api_key = cfg.get_secret("api_key")
    if api_key is None:
        raise LlmcapError(f"{NAMESPACE}:api_key: not set; the endpoint is closed by default. Set one with "
                          f"`pulumi config set --secret {NAMESPACE}:api_key \"$(openssl rand -hex 32)\"`")
    return mapping, Secrets(api_key=api_key, hf_token=cfg.get_secret("hf_token"))


def main() -> None:
    try:
        mapping, secrets = read_config()
        stack = stack_from_config(pulumi.get_stack(), mapping, source=f"stack {pulumi.get_stack()}")
        catalog = load_catalog()
        require_weights_source(catalog, stack.workload.model, stack.workload.weights_source)
        plan = plan_stack(stack, catalog)
    except LlmcapError as e:  # one readable line per problem instead of a traceback
        raise pulumi.RunError("\n".join(e.problems)) from None
    for key, value in build_program(stack, plan, catalog, secrets).items():
        pulumi.export(key, value)


main()
