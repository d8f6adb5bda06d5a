"""Git, the one adapter `llmcap diff` needs: stack files, saved plans and the traces stacks plan from at a
ref (`git ls-tree`, `git cat-file`, by subprocess, no GitPython) or in the working tree, and `diff_refs`,
which reads both sides and hands each pair to the pure cost diff (sizing.analysis.diff)."""

from __future__ import annotations

import fnmatch
import hashlib
import posixpath
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sizing.analysis.diff import (
    CostDiff,
    Planner,
    Side,
    StackDiff,
    build_diff,
    pair_renames,
    plan_side,
    side_unplanned,
    stack_diff,
)
from sizing.errors import SpecError
from sizing.user_files import DEFAULT_MAX_BYTES, MIB, read_user_file

DEFAULT_STACKS_GLOB = "stacks/Pulumi.*.yaml"


def git_bytes(args: list[str], cwd: Path) -> bytes:
    """git's stdout as bytes (what a commit holds is not necessarily text); a failure is one SpecError."""
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError:
        raise SpecError("git is not installed or not on PATH; llmcap diff --base needs it") from None
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).decode("utf-8", "replace").strip().splitlines()
        raise SpecError(f"git {' '.join(args)}: {msg[-1] if msg else 'failed'}")
    return bytes(r.stdout)


def git(args: list[str], cwd: Path) -> str:
    """git's stdout for commands whose output is git's own text (names, hashes); undecodable bytes are
    replaced, never raised."""
    return git_bytes(args, cwd).decode("utf-8", "replace")


def blob_text(ref: str, name: str, root: Path, what: str, max_bytes: int) -> str:
    """The UTF-8 text of `name` at `ref`, read as a file on disk is (sizing.user_files.read_user_file): its
    size checked before a byte is read, at most `max_bytes`, bytes decoded only once whole; anything else
    is one SpecError naming the file at its ref."""
    where = f"{ref}:{name}"
    size = int(git(["cat-file", "-s", where], root).strip() or 0)
    if size > max_bytes:
        raise SpecError(f"{where}: {size / MIB:,.1f} MiB is too large for a {what} "
                        f"(the limit is {max_bytes / MIB:g} MiB)")
    data = git_bytes(["cat-file", "blob", where], root)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"{where}: not UTF-8 text (byte {e.start}); a {what} is UTF-8 text") from None


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


@dataclass(frozen=True)
class Files:
    """Files read at one ref: path → text, and path → why it cannot be read (too large, not UTF-8, not a
    regular file); an unreadable file makes its side of the diff "unreadable", never a crash."""

    texts: dict[str, str] = field(default_factory=dict)
    unreadable: dict[str, SpecError] = field(default_factory=dict)

    def paths(self) -> set[str]:
        return set(self.texts) | set(self.unreadable)


def _read_all(names: list[str], read: Callable[[str], str]) -> Files:
    out = Files()
    for n in names:
        try:
            out.texts[n] = read(n)
        except SpecError as e:
            out.unreadable[n] = e
    return out


def files_at(ref: str | None, root: Path, pattern: str) -> Files:
    """Stack files matching `pattern` (relative to the repo root) at `ref`, or in the working tree
    when ref is None, each read within the stack file limits (sizing.stack.STACK_MAX_BYTES, UTF-8)."""
    from sizing.stack import STACK_MAX_BYTES

    if ref is None:
        on_disk = [p.relative_to(root).as_posix() for p in sorted(root.glob(pattern)) if p.is_file()]
        return _read_all(on_disk, lambda n: read_user_file(root / n, "stack file", max_bytes=STACK_MAX_BYTES))
    names = [n for n in git(["ls-tree", "-r", "--name-only", ref], root).splitlines() if matches(n, pattern)]
    return _read_all(names, lambda n: blob_text(ref, n, root, "stack file", STACK_MAX_BYTES))


def saved_plans_at(ref: str | None, root: Path, stack_paths: list[str]) -> Files:
    """The saved plan of each stack file that has one at `ref` (None = the working tree), keyed by the
    stack's path, each read within the saved-plan limits (sizing.user_files.DEFAULT_MAX_BYTES, UTF-8)."""
    from sizing.planning.saved_plan import saved_plan_path

    wanted = {saved_plan_path(p).as_posix(): p for p in stack_paths}
    if ref is None:
        present = [plan for plan in wanted if (root / plan).is_file()]
        files = _read_all(present, lambda n: read_user_file(root / n, "saved plan"))
    elif not wanted:
        return Files()
    else:
        present = [n for n in git(["ls-tree", "-r", "--name-only", ref, "--", *sorted(wanted)], root).splitlines()
                   if n in wanted]
        files = _read_all(present, lambda n: blob_text(ref, n, root, "saved plan", DEFAULT_MAX_BYTES))
    return Files({wanted[n]: t for n, t in files.texts.items()}, {wanted[n]: e for n, e in files.unreadable.items()})


class Traces:
    """The traces stacks plan from, at one ref (None = the working tree). A stack's trace path is relative to
    its stack file and must stay inside the repository; at a ref, the file is that commit's blob, its size
    checked against the trace limit (sizing.traffic.reader.MAX_TRACE_BYTES) before a byte is read, then
    streamed by `git cat-file` into a private temporary folder under its own name, where the reader reads it
    with all its bounds. An absolute path is read from disk on both sides (it is not in the repository)."""

    def __init__(self, ref: str | None, root: Path, tmp: Path) -> None:
        self.ref, self.root, self.tmp = ref, root, tmp
        self._copied: dict[str, Path] = {}

    def name_in_repo(self, stack_path: str, trace_path: str) -> str:
        name = posixpath.normpath(posixpath.join(posixpath.dirname(stack_path), trace_path))
        if name == ".." or name.startswith("../"):
            raise SpecError(f"trace {trace_path}: outside the repository (from {stack_path}); llmcap diff reads a "
                            "stack's trace at each ref, so keep it in the repository")
        return name

    def opener(self, stack_path: str) -> Callable[[str], Path]:
        """Where the trace path a stack at `stack_path` names is read from (sizing.stack.stack_from_config)."""

        def at(trace_path: str) -> Path:
            if Path(trace_path).is_absolute():
                return Path(trace_path)
            name = self.name_in_repo(stack_path, trace_path)
            if self.ref is None:
                return self.root / name
            return self._blob(name)

        return at

    def _blob(self, name: str) -> Path:
        from sizing.traffic.reader import MAX_TRACE_BYTES

        if name in self._copied:
            return self._copied[name]
        where = f"{self.ref}:{name}"
        try:
            size = int(git(["cat-file", "-s", where], self.root).strip() or 0)
        except SpecError:
            raise SpecError(f"trace {where}: not in that commit") from None
        if size > MAX_TRACE_BYTES:
            raise SpecError(f"trace {where}: {size / MIB:,.1f} MiB is above the trace limit "
                            f"({MAX_TRACE_BYTES / MIB:g} MiB)")
        folder = self.tmp / hashlib.sha256(where.encode()).hexdigest()[:16]
        folder.mkdir(parents=True, exist_ok=True)
        out = folder / posixpath.basename(name)
        with open(out, "wb") as fh:
            r = subprocess.run(["git", "cat-file", "blob", where], cwd=self.root, stdout=fh,
                               stderr=subprocess.PIPE, check=False)
        if r.returncode != 0:
            raise SpecError(f"trace {where}: git cat-file failed")
        self._copied[name] = out
        return out

    def identity(self, stack_path: str, text: str | None) -> str | None:
        """The git object id of the stack's trace at this ref (None: no trace, or none readable): two refs
        whose stack texts agree still differ when their traces do."""
        from sizing.stack import config_from_text, trace_path_of

        if text is None:
            return None
        try:
            p = trace_path_of(config_from_text(text, stack_path))
            if p is None or Path(p).is_absolute():
                return None
            name = self.name_in_repo(stack_path, p)
            if self.ref is None:
                f = self.root / name
                return git(["hash-object", "--", str(f)], self.root).strip() if f.is_file() else None
            return git(["rev-parse", "--verify", "--quiet", f"{self.ref}:{name}"], self.root).strip() or None
        except SpecError:
            return None


def _side(plan: Planner, name: str, path: str, ref: str, files: Files, plans: Files,
          traces: Traces | None = None) -> Side | None:
    """One side of a stack's diff: absent, unreadable (the file or its saved plan: the reason, no plan), or
    planned from its text (sizing.analysis.diff.plan_side), its trace read at the same ref (`traces`)."""
    err = files.unreadable.get(path) or plans.unreadable.get(path)
    if err is not None:
        return side_unplanned(ref, err, "unreadable")
    if path not in files.texts:
        return None
    return plan_side(plan, name, files.texts[path], ref, path, plans.texts.get(path),
                     traces.opener(path) if traces is not None else None)


def diff_refs(base: str, head: str | None, planner: Planner, pattern: str = DEFAULT_STACKS_GLOB,
              cwd: Path | None = None) -> CostDiff:
    """Every stack file matching `pattern` added, removed or changed between base and head
    (None = the working tree), planned on both sides, each from its own ref's traces."""
    root = repo_root(cwd or Path.cwd())
    check_ref(base, root)
    if head is not None:
        check_ref(head, root)
    with tempfile.TemporaryDirectory(prefix="llmcap-diff-traces-") as tmp:
        return _diff_refs(base, head, planner, pattern, root, Traces(base, root, Path(tmp) / "base"),
                          Traces(head, root, Path(tmp) / "head"))


def _diff_refs(base: str, head: str | None, planner: Planner, pattern: str, root: Path, old_traces: Traces,
               new_traces: Traces) -> CostDiff:
    from sizing.stack import stack_name

    plan = planner
    old_files, new_files = files_at(base, root, pattern), files_at(head, root, pattern)
    old_plans = saved_plans_at(base, root, sorted(old_files.texts))
    new_plans = saved_plans_at(head, root, sorted(new_files.texts))
    old, new = old_files.texts, new_files.texts
    head_label = head or "working tree"
    renames = pair_renames({p: t for p, t in old.items() if p not in new_files.paths()},
                           {p: t for p, t in new.items() if p not in old_files.paths()})
    renamed_old = set(renames.values())
    out: list[StackDiff] = []
    same = 0
    for path in sorted(old_files.paths() | new_files.paths()):
        if path in renamed_old:
            continue
        if path in old and old.get(path) == new.get(path) and old_plans.texts.get(path) == new_plans.texts.get(path) \
                and path not in old_plans.unreadable and path not in new_plans.unreadable \
                and old_traces.identity(path, old.get(path)) == new_traces.identity(path, new.get(path)):
            same += 1
            continue
        name = stack_name(Path(path))
        was = renames.get(path, path)
        b = _side(plan, stack_name(Path(was)), was, base, old_files, old_plans, old_traces)
        a = _side(plan, name, path, head_label, new_files, new_plans, new_traces)
        out.append(stack_diff(name, path, b, a, renamed_from=was if was != path else None))
    return build_diff(base, head_label, out, same)
