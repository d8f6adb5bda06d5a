"""Saved plans: the plan a stack deploys, as a reviewed file beside its stack file.

`llmcap plan stacks/Pulumi.<env>.yaml --write` writes `stacks/Pulumi.<env>.plan.json`. Pulumi never
takes it for a stack's config: the CLI's stack config file is
`fmt.Sprintf("%s.%s%s", ProjectFile, qnameFileName(stackName), filepath.Ext(projPath))` under
`stackConfigDir` (pulumi/pulumi sdk/go/common/workspace/paths.go, `ProjectStackPath`), i.e.
`Pulumi.<stack>` plus the project file's extension, `.yaml` here; a `.json` file is never one.

A saved plan holds:
- `fingerprint`: sha256 of the inputs that determine the plan, read from the stack file (region,
  `llmcap:workload`, `llmcap:hardware`, `llmcap:deployment`, `llmcap:budget_usd_month`), validated and
  canonical (defaults left out, so a comment or a newly added default field does not make it stale);
- `generation`: which catalog files and calibration (bundled, a refresh cache, an overlay) the plan
  was made with, with their sha256: for information and review, never re-read;
- `pinned`: the catalog rows the Pulumi program reads besides the plan (AZ offerings of the region,
  the specs of the plan's instance types), so a later `llmcap catalog refresh` cannot move subnets
  or node sizes of a running stack;
- `plan`: the Plan itself;
- `digest`: sha256 over all of the above (sizing/planning/plan_integrity.py `body_digest`), written by
  `--write`. Reading a saved plan checks it and the Plan's own figures (`plan_problems`), so a plan
  edited by hand, NaN or negative is refused with one line (`SavedPlanRefusedError`) by `render`, the
  Pulumi program and `llmcap diff` alike.

The Pulumi program (infra/__main__.py) and `llmcap render` deploy the saved plan and never re-plan;
`llmcap diff` compares saved plans between git refs. Nothing here imports pulumi or boto3.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sizing.catalog.calibration import CALIBRATION_FILE
from sizing.catalog.paths import BUNDLED_DIR, CATALOG_FILES
from sizing.errors import SpecError
from sizing.plan import Plan
from sizing.stack import Stack
from sizing.user_files import atomic_write_text, read_user_file

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog

# 2 (issue 32): the `digest` over the body, checked on every read
SAVED_PLAN_VERSION = 2
SUFFIX = ".plan.json"
# the stack-file keys whose values determine the plan (the secrets api_key/hf_token do not)
FINGERPRINT_KEYS = ("aws:region", "llmcap:workload", "llmcap:hardware", "llmcap:deployment",
                    "llmcap:budget_usd_month")


class StalePlanError(SpecError):
    """The saved plan does not match its stack file, or there is none (exit 2)."""


class SavedPlanRefusedError(StalePlanError):
    """The saved plan is not what `llmcap plan --write` wrote: edited by hand (its digest), or figures
    that cannot be the planner's (NaN, negative, not adding up) (exit 2)."""


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FileHash(_M):
    name: str
    sha256: str  # first 16 hex digits
    source: str  # "bundled" or where it was read from ("~" for the home folder)


class Generation(_M):
    """Where the plan's data came from (for review; the program never reads these files)."""

    llmcap_version: str
    catalog: list[FileHash]
    calibration: FileHash
    overlay: FileHash | None = None  # the user's calibration overlay, when the plan applied one
    overlay_notes: list[str] = Field(default_factory=list)


class Pinned(_M):
    """Catalog rows the Pulumi program reads besides the plan, frozen at --write."""

    region: str
    offerings: dict[str, list[str]]  # instance type -> AZ IDs offering it in `region` (every type there)
    instances: list[dict[str, Any]]  # sizing.catalog.lookup.Instance rows of the plan's instance types
    # the sizing.catalog.lookup.ModelArch of the plan's model
    models: list[dict[str, Any]] = Field(default_factory=list)


class SavedPlan(_M):
    saved_plan_version: int = SAVED_PLAN_VERSION
    stack: str
    stack_file: str  # as given to --write, for the messages
    fingerprint: str
    fingerprint_of: list[str] = Field(default_factory=lambda: list(FINGERPRINT_KEYS))
    generation: Generation
    pinned: Pinned
    plan: Plan
    digest: str | None = None  # plan_integrity.body_digest of everything above; set by sealed()

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"

    def sealed(self) -> SavedPlan:
        """This saved plan with its digest, computed over its JSON as written (so a reader that parses
        the file computes the same digest)."""
        from sizing.planning.plan_integrity import DIGEST_KEY, body_digest

        doc = json.loads(self.model_copy(update={DIGEST_KEY: None}).to_json())
        return self.model_copy(update={DIGEST_KEY: body_digest(doc)})


# ---------------------------------------------------------------- names and fingerprints


def saved_plan_path(stack_file: str | Path) -> Path:
    """`stacks/Pulumi.dev.yaml` -> `stacks/Pulumi.dev.plan.json` (same folder).

    Pulumi takes `Pulumi.<stack>.yaml` under `stackConfigDir` as a stack's config; a `.plan.json`
    file is never one, so the CLI ignores it."""
    p = Path(stack_file)
    stem = p.name[: -len(p.suffix)] if p.suffix in (".yaml", ".yml") else p.name
    return p.with_name(stem + SUFFIX)


def spec_inputs(stack: Stack) -> dict[str, Any]:
    """The plan's inputs from a validated stack, canonical: JSON types, defaults left out."""
    return {
        "aws:region": stack.region,
        "llmcap:workload": stack.workload.model_dump(mode="json", exclude_defaults=True),
        "llmcap:hardware": stack.hardware.model_dump(mode="json", exclude_defaults=True),
        "llmcap:deployment": stack.deployment.model_dump(mode="json", exclude_defaults=True),
        "llmcap:budget_usd_month": stack.budget_usd_month,
    }


def spec_fingerprint(stack: Stack) -> str:
    text = json.dumps(spec_inputs(stack), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- generation (for information)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _shown(path: Path) -> str:
    """A path fit for a committed file: the bundled data as "bundled", the home folder as "~"."""
    try:
        if path.resolve().parent == BUNDLED_DIR.resolve():
            return "bundled"
    except OSError:
        pass
    home = str(Path.home())
    s = str(path)
    return "~" + s[len(home):] if home and s.startswith(home + os.sep) else s


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("llmcap")
    except Exception:  # noqa: BLE001 - not installed (the Pulumi program adds the tree to sys.path)
        return "unknown"


def generation_of(catalog: Catalog, overlay_notes: list[str]) -> Generation:
    # the core tables always; any other table the plan read from an override directory too (the
    # bundled ones are the same for every llmcap version and stay out, so a bundled plan is unchanged)
    names = list(CATALOG_FILES) + sorted(n for n in catalog.overridden
                                         if n not in CATALOG_FILES and n != CALIBRATION_FILE.name)
    cat_files = [FileHash(name=n, sha256=_sha(catalog._path(n)), source=_shown(catalog._path(n))) for n in names]
    cal = catalog._path(CALIBRATION_FILE.name)  # the override directory's fit, else the bundled one
    overlay = None
    if overlay_notes:
        from sizing.perf.overlay import overlay_path

        p = overlay_path()
        if p.is_file():
            overlay = FileHash(name=p.name, sha256=_sha(p), source=_shown(p))
    return Generation(llmcap_version=_version(), catalog=cat_files,
                      calibration=FileHash(name=cal.name, sha256=_sha(cal), source=_shown(cal)),
                      overlay=overlay, overlay_notes=overlay_notes)


def pinned_of(plan: Plan, catalog: Catalog, stack: Stack) -> Pinned:
    from sizing.catalog.weights_source import workload_model

    offerings = {t: list(azs) for (t, region), azs in sorted(catalog.offerings.items()) if region == plan.region}
    types = sorted({p.instance_type for p in plan.pools})
    model = workload_model(catalog, stack.workload.model, stack.workload.weights_source)  # as the planner read it
    return Pinned(region=plan.region, offerings=offerings,
                  instances=[asdict(catalog.instance(t)) for t in types], models=[asdict(model)])


def make_saved_plan(stack_file: str | Path, stack: Stack, plan: Plan, catalog: Catalog) -> SavedPlan:
    notes = [a for a in plan.assumptions if a.startswith("calibration overlay")]
    return SavedPlan(stack=stack.name, stack_file=Path(stack_file).as_posix(), fingerprint=spec_fingerprint(stack),
                     generation=generation_of(catalog, notes), pinned=pinned_of(plan, catalog, stack), plan=plan)


def write_saved_plan(saved: SavedPlan, path: Path) -> Path:
    """Write atomically (sizing.user_files.atomic_write_text), with the usual mode of a committed file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, saved.sealed().to_json(), usual_mode=True)
    return path


# ---------------------------------------------------------------- reading and checking


def rewrite_hint(stack_file: str) -> str:
    return f"run llmcap plan {stack_file} --write and review the diff"


def parse_saved_plan(text: str, where: str, stack_file: str) -> SavedPlan:
    """A saved plan from its text, or one StalePlanError line naming the file and the fix.

    A saved plan of this version must carry the digest `--write` sealed it with, and its Plan's figures
    must add up (SavedPlanRefusedError); an older version is left to `check_current`, which names it."""
    doc = _json_object(text)
    if doc is not None and doc.get("saved_plan_version") == SAVED_PLAN_VERSION:
        check_integrity(doc, where, stack_file)
    try:
        saved = SavedPlan.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise StalePlanError(f"{where}: not a saved plan this llmcap can read ({loc}: {first['msg']}): "
                             f"{rewrite_hint(stack_file)}") from None
    if saved.saved_plan_version == SAVED_PLAN_VERSION:
        _refuse_if(plan_problems_of(saved.plan), where, stack_file)
    return saved


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _refuse_if(problems: list[str], where: str, stack_file: str) -> None:
    from sizing.planning.plan_integrity import one_line

    if problems:
        raise SavedPlanRefusedError(f"{where}: {one_line(problems)}: {rewrite_hint(stack_file)}")


def plan_problems_of(plan: Plan) -> list[str]:
    from sizing.cost.money import HOURS_PER_MONTH
    from sizing.planning.plan_integrity import plan_problems

    return plan_problems(plan, HOURS_PER_MONTH)


def check_integrity(doc: dict[str, Any], where: str, stack_file: str) -> None:
    """The digest `--write` sealed the file with, and the numbers of its plan (before pydantic reads
    them: NaN is a float to it)."""
    from sizing.planning.plan_integrity import DIGEST_KEY, body_digest, number_problems

    claimed = doc.get(DIGEST_KEY)
    if not claimed:
        _refuse_if(["has no digest (not written by llmcap plan --write)"], where, stack_file)
    if claimed != body_digest(doc):
        _refuse_if(["edited since llmcap plan --write (its digest does not match its content)"], where,
                   stack_file)
    _refuse_if(number_problems(doc.get("plan"), "plan"), where, stack_file)


def read_saved_plan(path: Path, stack_file: str) -> SavedPlan | None:
    """The saved plan at `path`, None when there is none."""
    if not path.exists():
        return None
    return parse_saved_plan(read_user_file(path, "saved plan"), str(path), stack_file)


def check_current(saved: SavedPlan, stack: Stack, stack_file: str) -> None:
    """One line when the stack file's spec no longer matches the saved plan."""
    if saved.saved_plan_version != SAVED_PLAN_VERSION:
        raise StalePlanError(f"{stack_file}: its saved plan has version {saved.saved_plan_version}, this llmcap "
                             f"reads {SAVED_PLAN_VERSION}: {rewrite_hint(stack_file)}")
    if saved.stack != stack.name or saved.plan.stack != stack.name:
        raise StalePlanError(f"{stack_file}: its saved plan is for stack {saved.stack!r}, not {stack.name!r}: "
                             f"{rewrite_hint(stack_file)}")
    if saved.fingerprint != spec_fingerprint(stack):
        raise StalePlanError(f"{stack_file} changed since its saved plan: {rewrite_hint(stack_file)}")


def require_saved_plan(stack_file: str, plan_file: Path, stack: Stack) -> SavedPlan:
    """The current saved plan of a stack, or one line: none written yet, unreadable, or stale."""
    saved = read_saved_plan(plan_file, stack_file)
    if saved is None:
        raise StalePlanError(f"{stack_file} has no saved plan ({saved_plan_path(stack_file).as_posix()}): "
                             f"run llmcap plan {stack_file} --write and review it")
    check_current(saved, stack, stack_file)
    return saved


def load_plan_file(path: str | Path) -> Plan:
    """A saved Plan JSON (`llmcap plan --out` / `--format json`, or the `plan` of a saved plan
    `stacks/Pulumi.<env>.plan.json` from `llmcap plan --write`), or one SpecError per problem.

    A saved plan's seal is checked (`check_integrity`); a bare Plan JSON carries none, so for both the
    Plan's own figures must add up (`plan_integrity.plan_problems`)."""
    from sizing.planning.plan_integrity import number_problems, one_line

    p = Path(path)
    text = read_user_file(p, "plan file", "write one with llmcap plan --format json")
    doc = _json_object(text)
    if doc is not None and "saved_plan_version" in doc and isinstance(doc.get("plan"), dict):
        if doc.get("saved_plan_version") == SAVED_PLAN_VERSION:  # sealed by --write: check the seal
            try:
                check_integrity(doc, str(p), str(doc.get("stack_file") or "STACK_FILE"))
            except SavedPlanRefusedError as e:
                raise SpecError(e.problems[0]) from None
        doc = doc["plan"]  # a saved plan (llmcap plan --write): the Plan inside it
        text = json.dumps(doc)
    numbers = number_problems(doc, "plan") if doc is not None else []
    if numbers:  # before pydantic, to which NaN is a float
        raise SpecError(f"{p}: {one_line(numbers)}")
    try:
        plan = Plan.from_json(text)
    except ValidationError as e:
        msg = f"{p}: not a Plan JSON (llmcap plan --format json): {e.error_count()} problem(s)"
        raise SpecError(msg, [msg] + [f"{p}: {'.'.join(str(x) for x in err['loc'])}: {err['msg']}"
                                      for err in e.errors()[:5]]) from None
    problems = plan_problems_of(plan)
    if problems:
        raise SpecError(f"{p}: {one_line(problems)}")
    return plan
