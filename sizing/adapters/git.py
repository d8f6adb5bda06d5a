"""Git, the one adapter `llmcap diff` needs: stack files and saved plans at a ref (`git ls-tree`,
`git show`, by subprocess, no GitPython) or in the working tree, and `diff_refs`, which reads both
sides and hands each pair to the pure cost diff (sizing.analysis.diff)."""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

from sizing.analysis.diff import (
    CostDiff,
    Planner,
    StackDiff,
    build_diff,
    pair_renames,
    plan_side,
    stack_diff,
)
from sizing.errors import SpecError

DEFAULT_STACKS_GLOB = "stacks/Pulumi.*.yaml"


def git(args: list[str], cwd: Path) -> str:
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise SpecError("git is not installed or not on PATH; llmcap diff --base needs it") from None
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip().splitlines()
        raise SpecError(f"git {' '.join(args)}: {msg[-1] if msg else 'failed'}")
    return r.stdout


def repo_root(cwd: Path) -> Path:
    return Path(git(["rev-parse", "--show-toplevel"], cwd).strip())


def check_ref(ref: str, root: Path) -> None:
    if ref.startswith("-"):
        raise SpecError(f"--base/--head {ref!r}: not a git ref")
    try:
        git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], root)
    except SpecError:
        raise SpecError(f"{ref!r} is not a commit in this repository (in CI, check out with fetch-depth: 0)") from None


def matches(path: str, pattern: str) -> bool:
    """Glob match with Path.glob's meaning: `*` stays within one folder unless the pattern has `**`."""
    if "**" not in pattern and path.count("/") != pattern.count("/"):
        return False
    return fnmatch.fnmatchcase(path, pattern)


def files_at(ref: str | None, root: Path, pattern: str) -> dict[str, str]:
    """Stack files matching `pattern` (relative to the repo root) at `ref`, or in the working tree
    when ref is None: path → text."""
    if ref is None:
        return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
                for p in sorted(root.glob(pattern)) if p.is_file()}
    names = [n for n in git(["ls-tree", "-r", "--name-only", ref], root).splitlines() if matches(n, pattern)]
    return {n: git(["show", f"{ref}:{n}"], root) for n in names}


def saved_plans_at(ref: str | None, root: Path, stack_paths: list[str]) -> dict[str, str]:
    """The saved plan text of each stack file that has one at `ref` (None = the working tree):
    stack path → plan text."""
    from sizing.planning.saved_plan import saved_plan_path

    wanted = {saved_plan_path(p).as_posix(): p for p in stack_paths}
    if ref is None:
        return {stack: (root / plan).read_text(encoding="utf-8") for plan, stack in wanted.items()
                if (root / plan).is_file()}
    if not wanted:
        return {}
    present = git(["ls-tree", "-r", "--name-only", ref, "--", *sorted(wanted)], root).splitlines()
    return {wanted[n]: git(["show", f"{ref}:{n}"], root) for n in present if n in wanted}


def diff_refs(base: str, head: str | None, planner: Planner, pattern: str = DEFAULT_STACKS_GLOB,
              cwd: Path | None = None) -> CostDiff:
    """Every stack file matching `pattern` added, removed or changed between base and head
    (None = the working tree), planned on both sides."""
    from sizing.stack import stack_name

    root = repo_root(cwd or Path.cwd())
    check_ref(base, root)
    if head is not None:
        check_ref(head, root)
    plan = planner
    old, new = files_at(base, root, pattern), files_at(head, root, pattern)
    old_plans, new_plans = saved_plans_at(base, root, sorted(old)), saved_plans_at(head, root, sorted(new))
    head_label = head or "working tree"
    renames = pair_renames({p: t for p, t in old.items() if p not in new},
                           {p: t for p, t in new.items() if p not in old})
    renamed_old = set(renames.values())
    out: list[StackDiff] = []
    same = 0
    for path in sorted(set(old) | set(new)):
        if path in renamed_old:
            continue
        if old.get(path) == new.get(path) and old_plans.get(path) == new_plans.get(path):
            same += 1
            continue
        name = stack_name(Path(path))
        was = renames.get(path, path)
        b = plan_side(plan, stack_name(Path(was)), old[was], base, was, old_plans.get(was)) if was in old else None
        a = plan_side(plan, name, new[path], head_label, path, new_plans.get(path)) if path in new else None
        out.append(stack_diff(name, path, b, a, renamed_from=was if was != path else None))
    return build_diff(base, head_label, out, same)
