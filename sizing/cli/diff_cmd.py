"""`llmcap diff`: what a change to the stacks does to the bill, for pull requests.

Register in sizing/cli/__init__.py with `app.command("diff")(diff_cmd.diff)`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from sizing.cli.common import Format, console, guarded

if TYPE_CHECKING:
    from sizing.analysis.diff import CostDiff


def _attach_previews(d: CostDiff, specs: list[str], catalog: Path | None) -> None:
    """`--preview-json [STACK=]FILE`: price the resources of a preview (stack from its URNs) or of
    `llmcap render`'s resources.json (STACK= required, or the diff's only stack)."""
    from sizing.analysis.diff import attach_resources
    from sizing.catalog.lookup import load_catalog
    from sizing.cost.resources import load_resources, price_resources
    from sizing.cost.resources.base import PricingContext
    from sizing.errors import SpecError
    from sizing.stack import DEFAULT_REGION

    cat = load_catalog(catalog)
    for spec in specs:
        stack, _, file = spec.rpartition("=") if "=" in spec else ("", "", spec)
        resources = load_resources(Path(file))
        if not stack:
            named = {r.stack for r in resources if r.stack}
            heads = [s.stack for s in d.stacks if s.after is not None]
            if len(named) == 1:
                stack = named.pop()
            elif len(heads) == 1:
                stack = heads[0]
            else:
                raise SpecError(f"--preview-json {file}: say which stack it is for: --preview-json STACK={file}")
        side = next((s.after for s in d.stacks if s.stack == stack and s.after is not None), None)
        region = side.region if side is not None and side.region else DEFAULT_REGION
        attach_resources(d, stack, price_resources(resources, PricingContext(cat, region)))


def _attach_renders(d: CostDiff, head: str | None, pattern: str, catalog: Path | None) -> None:
    """`--render`: run each changed stack's head side through the Pulumi program under the mock
    engine (as `llmcap render` does) and price every resource it would create."""
    import json
    import tempfile

    from infra.config.image_lock import resolve_pins
    from infra.program import render_stack
    from infra.render import resources_document  # heavy (pulumi): only with --render
    from sizing.adapters.git import files_at, repo_root, saved_plans_at
    from sizing.analysis.diff import attach_resources, saved_side
    from sizing.catalog.lookup import load_catalog
    from sizing.cost.resources import load_resources, price_resources
    from sizing.cost.resources.base import PricingContext
    from sizing.planning.pinned_catalog import PinnedCatalog
    from sizing.planning.planner import plan_stack
    from sizing.stack import config_from_text, stack_from_config, stack_name

    cat = load_catalog(catalog)
    root = repo_root(Path.cwd())
    texts = files_at(head, root, pattern).texts
    plans = saved_plans_at(head, root, sorted(texts)).texts
    wanted = {s.stack for s in d.stacks if s.after is not None and s.after.planned}
    for path, text in texts.items():
        name = stack_name(Path(path))
        if name not in wanted:
            continue
        stack = stack_from_config(name, config_from_text(text, path), path)
        # image references change no price: the working tree's lock where it has a digest, else the tag
        pins = resolve_pins(root / path, allow_unpinned=True)
        if path in plans:  # the saved plan, rendered as pulumi up deploys it
            saved = saved_side(name, text, plans[path], head or "working tree", path)[1]
            result = render_stack(stack, saved.plan, PinnedCatalog(saved.pinned), pins)
        else:
            result = render_stack(stack, plan_stack(stack, cat, None, goodput_scale=None), cat, pins)
        with tempfile.TemporaryDirectory() as tmp:
            f = Path(tmp) / "resources.json"
            f.write_text(json.dumps(resources_document(result)))
            lines = price_resources(load_resources(f), PricingContext(cat, stack.region))
        attach_resources(d, name, lines)


def check_gates(d: CostDiff, fail_above_percent: float | None, budget_usd_month: float | None) -> None:
    """Exit 1 (CheckFailedError) when gate_problems finds any."""
    from sizing.errors import CheckFailedError

    problems = gate_problems(d, fail_above_percent, budget_usd_month)
    if problems:
        raise CheckFailedError(problems[0], problems)


def gate_problems(d: CostDiff, fail_above_percent: float | None, budget_usd_month: float | None) -> list[str]:
    """Why the gates fail: the increase or the new total crosses a limit, a stack's monthly cost
    after the change is above its own llmcap:budget_usd_month, or a stack that cannot be planned at
    head (invalid, infeasible, or a stale saved plan) when a gate applies to it (--fail-above-percent,
    --budget-usd-month, or its own llmcap:budget_usd_month): its cost is unknown, so the gate fails
    closed instead of passing it as $0. A head whose saved plan is refused (edited by hand, NaN,
    negative, figures that do not add up) fails whether or not a gate is set."""
    from sizing.analysis.diff import REFUSED

    problems: list[str] = []
    gated = fail_above_percent is not None or budget_usd_month is not None
    for sd in d.stacks:
        a = sd.after
        if a is not None and not a.planned and (gated or (a.reason or "").startswith(REFUSED)
                                                or a.budget_usd_month is not None):
            problems.append(f"stack {sd.stack} cannot be priced at {d.head} ({a.reason}); the gate "
                            "fails closed")
    if fail_above_percent is not None and d.total_delta_usd_per_month > 0:
        pct = d.total_delta_percent
        if pct is None or pct > fail_above_percent:
            shown = "from $0" if pct is None else f"{pct:+.1f}%"
            problems.append(f"monthly cost rises by ${d.total_delta_usd_per_month:,.0f} ({shown}), above "
                            f"--fail-above-percent {fail_above_percent:g}%")
    if budget_usd_month is not None and d.total_after_usd_per_month > budget_usd_month:
        problems.append(f"monthly cost after the change is ${d.total_after_usd_per_month:,.0f}, above "
                        f"--budget-usd-month ${budget_usd_month:,.0f}")
    for sd in d.stacks:
        a = sd.after
        if a is not None and a.budget_usd_month is not None and a.usd_per_month is not None \
                and a.usd_per_month > a.budget_usd_month:
            problems.append(f"stack {sd.stack}: ${a.usd_per_month:,.0f}/month after the change is above its "
                            f"llmcap:budget_usd_month ${a.budget_usd_month:,.0f}")
    return problems


def stdout_is_terminal() -> bool:
    """A person at a terminal gets the table; a pipe, a file or CI gets markdown for a PR comment."""
    return sys.stdout.isatty()


@guarded
def diff(
    base: str | None = typer.Option(None, "--base", help="git ref to compare against, e.g. origin/main"),
    head: str | None = typer.Option(None, "--head", help="git ref of the change (default: the working tree)"),
    stacks: str = typer.Option("stacks/Pulumi.*.yaml", "--stacks", help="glob of stack files, from the repo root"),
    fmt: Format | None = typer.Option(None, "--format", help="table (default in a terminal), markdown (default "
                                      "when piped or written to a PR comment) or json"),
    from_plan: Path | None = typer.Option(None, "--from", help="a saved Plan JSON (before)"),
    to_plan: Path | None = typer.Option(None, "--to", help="a saved Plan JSON (after)"),
    preview_json: list[str] = typer.Option([], "--preview-json",
                                           help="[STACK=]FILE: `pulumi preview --json` output or `llmcap render` "
                                                "resources.json; priced per resource (repeatable)"),
    fail_above_percent: float | None = typer.Option(None, "--fail-above-percent",
                                                    help="exit 1 if the monthly cost rises by more than P %"),
    budget_usd_month: float | None = typer.Option(None, "--budget-usd-month",
                                                  help="exit 1 if the monthly cost after the change exceeds N USD"),
    render_resources: bool = typer.Option(False, "--render", help="price every resource of each changed "
                                          "stack's rendered program (Pulumi mock engine, a few seconds a stack)"),
    out: Path | None = typer.Option(None, "--out", help="also write the output here"),
    catalog: Path | None = typer.Option(None, "--catalog", help="catalog directory (llmcap catalog refresh)"),
) -> None:
    """Cost diff of the stacks between two git refs (or two saved plans): GPUs, $/hour, $/month with
    ranges, $/1M tokens, SLOs and the hosted-API comparison, as a PR comment, JSON or a table.
    Each side is the ref's saved plan (stacks/Pulumi.<env>.plan.json) where it has one, else planned
    here with the bundled calibration; the output says which."""
    from sizing.adapters.git import diff_refs
    from sizing.analysis.diff import diff_plans
    from sizing.errors import SpecError
    from sizing.planning.planner import default_planner
    from sizing.planning.saved_plan import load_plan_file
    from sizing.report import diff_views

    if from_plan or to_plan:
        if base or head:
            raise SpecError("use either --base/--head (git) or --from/--to (saved plans), not both")
        d = diff_plans(load_plan_file(from_plan) if from_plan else None,
                       load_plan_file(to_plan) if to_plan else None,
                       from_plan.name if from_plan else "nothing", to_plan.name if to_plan else "nothing")
    elif base:
        d = diff_refs(base, head, default_planner(catalog), stacks)
    else:
        raise SpecError("say what to compare: --base REF [--head REF], or --from a.json --to b.json")
    if render_resources:
        if not base:
            raise SpecError("--render prices the head side of a git diff: give --base REF")
        _attach_renders(d, head, stacks, catalog)
    if preview_json:
        _attach_previews(d, preview_json, catalog)
    if fmt is None:
        fmt = Format.table if stdout_is_terminal() else Format.markdown
    problems = gate_problems(d, fail_above_percent, budget_usd_month)
    if fmt == Format.table:
        render = None
        diff_views.render_table(d, console())
    else:
        render = diff_views.render_json(d) if fmt == Format.json else diff_views.render_markdown(d, gate=problems)
        typer.echo(render, nl=not render.endswith("\n"))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render if render is not None else diff_views.render_markdown(d, gate=problems),
                       encoding="utf-8")
    if problems:
        from sizing.errors import CheckFailedError

        raise CheckFailedError(problems[0], problems)
