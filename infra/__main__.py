"""Pulumi entry point (`main: infra/` in Pulumi.yaml): read `llmcap:*` config once, validate it,
load the stack's SAVED plan (`llmcap plan stacks/Pulumi.<env>.yaml --write`, see sizing/planning/saved_plan.py),
build the components, export the plan summary.

It never re-plans: the catalog cache and calibration overlay of the machine running `pulumi up`
change nothing until a new plan is written and reviewed. A stack whose spec no longer matches its
saved plan, or that has none, stops here with one line and creates nothing."""

from __future__ import annotations

import sys
from pathlib import Path

# Pulumi runs this directory as the program; make `import sizing` / `import infra.x` work even
# without the editable install
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import pulumi  # noqa: E402

from infra.config.image_lock import resolve_pins  # noqa: E402
from infra.fit.check import NotDeployable  # noqa: E402
from infra.kubernetes.pulled_images import installed_chart_keys, pulled_image_keys  # noqa: E402
from infra.program import Secrets, build_program  # noqa: E402
from sizing.catalog.weights_source import require_weights_source  # noqa: E402
from sizing.errors import LlmcapError  # noqa: E402
from sizing.planning.pinned_catalog import PinnedCatalog  # noqa: E402
from sizing.planning.saved_plan import require_saved_plan, saved_plan_path  # noqa: E402
from sizing.stack import NAMESPACE, stack_from_config  # noqa: E402

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
    # the plain value only to refuse an empty one: vLLM treats an empty --api-key / VLLM_API_KEY as
    # "no key" and serves every route unauthenticated (vllm 0.33.0 api_server: `if args.api_key:`)
    plain_key = cfg.get("api_key")
    if plain_key is None or not plain_key.strip():
        state = "not set" if plain_key is None else "empty"
        raise LlmcapError(f"{NAMESPACE}:api_key: {state}; an empty key turns vLLM's auth off. Set one with "
                          f"`pulumi config set --secret {NAMESPACE}:api_key \"$(openssl rand -hex 32)\"`")
    return mapping, Secrets(api_key=pulumi.Output.secret(plain_key), hf_token=cfg.get_secret("hf_token"))


def stack_file(project_dir: Path, stack: str) -> Path:
    """Where the Pulumi CLI reads this stack's config: `stackConfigDir`/Pulumi.<stack>.yaml
    (pulumi/pulumi sdk/go/common/workspace/paths.go `ProjectStackPath`; the extension is the
    project file's)."""
    import yaml

    project = yaml.safe_load((project_dir / "Pulumi.yaml").read_text(encoding="utf-8")) or {}
    return project_dir / str(project.get("stackConfigDir") or ".") / f"Pulumi.{stack}.yaml"


def main() -> None:
    try:
        mapping, secrets = read_config()
        stack = stack_from_config(pulumi.get_stack(), mapping, source=f"stack {pulumi.get_stack()}")
        project_dir = Path(_ROOT)
        config_file = stack_file(project_dir, stack.name)
        shown = config_file.relative_to(project_dir).as_posix()
        saved = require_saved_plan(shown, saved_plan_path(config_file), stack)
        plan, catalog = saved.plan, PinnedCatalog(saved.pinned)
        require_weights_source(catalog, stack.workload.model, stack.workload.weights_source)
        # the image digests, from the lock beside the stack file (stacks/images.lock.json)
        pins = resolve_pins(config_file, stack.deployment.allow_unpinned_images,
                            pulled_image_keys(plan, stack.deployment.provisioner))
    except LlmcapError as e:  # one readable line per problem instead of a traceback
        raise pulumi.RunError("\n".join(e.problems)) from None
    for line in (pins.warning(), pins.charts_note(installed_chart_keys(plan, stack.deployment.provisioner))):
        if line:
            pulumi.log.warn(line)
    try:
        outputs = build_program(stack, plan, catalog, secrets, pins, deploying=True)
    except NotDeployable as e:  # before any resource exists: one line per problem, nothing created
        raise pulumi.RunError("\n".join(e.report.lines())) from None
    for key, value in outputs.items():
        pulumi.export(key, value)


main()
