"""The import graph of the project's own modules, and the checks the layering test makes on it.

An edge A -> B means module A imports module B anywhere in its source (module level or inside a
function: a lazy import is still a dependency), except under `if TYPE_CHECKING:` (no run-time edge).
`from pkg import name` is an edge to `pkg.name` when that is a module, else to `pkg`. A package's
`__init__.py` is the package's own name.

Pure functions over a {module: {imported modules}} dict, so tests/test_layering.py can also run them
on synthetic packages; `python scripts/import_chain.py` prints the longest chain.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from pathlib import Path

Graph = dict[str, set[str]]
Edge = tuple[str, str]


def module_name(root: Path, py: Path) -> str:
    parts = list(py.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes that sit under `if TYPE_CHECKING:`."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                for sub in node.body:
                    skip |= {id(n) for n in ast.walk(sub)}
    return skip


def import_graph(root: Path, packages: Iterable[str], type_checking: bool = False) -> Graph:
    """Edges between the modules of `packages` (top-level package names under `root`);
    `type_checking`: count the imports under `if TYPE_CHECKING:` too."""
    files = {module_name(root, py): py for pkg in packages for py in sorted((root / pkg).rglob("*.py"))}
    known = set(files)
    graph: Graph = {m: set() for m in files}
    for mod, py in files.items():
        tree = ast.parse(py.read_text(encoding="utf-8"), filename=str(py))
        skip = set() if type_checking else _type_checking_only(tree)
        is_pkg = py.name == "__init__.py"
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                targets = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in known else prefix for a in node.names]
            for t in targets:
                # `import a.b.c` depends on the deepest known module of that name
                while t and t not in known:
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's algorithm: the components with more than one module (import circles), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def without(graph: Graph, edges: Iterable[Edge]) -> Graph:
    drop = set(edges)
    return {a: {b for b in bs if (a, b) not in drop} for a, bs in graph.items()}


def upward_edges(graph: Graph, layer_of: Callable[[str], int]) -> list[Edge]:
    """Edges from a lower layer into a higher one (a higher number is a higher layer)."""
    return sorted((a, b) for a, bs in graph.items() for b in bs if layer_of(b) > layer_of(a))


def layering_problems(graph: Graph, layer_of: Callable[[str], int], allowed: set[Edge]) -> list[str]:
    """What the layering test fails on: an import circle or an upward edge that the allowlist does
    not name, and an allowlisted edge that is gone or no longer a violation (so the list shrinks)."""
    problems = []
    rest = without(graph, allowed)
    for comp in strongly_connected(rest):
        inside = sorted((a, b) for a in comp for b in rest[a] if b in comp)
        problems.append(f"import circle {' <-> '.join(comp)}: " + ", ".join(f"{a} -> {b}" for a, b in inside))
    for a, b in upward_edges(rest, layer_of):
        problems.append(f"upward import {a} (layer {layer_of(a)}) -> {b} (layer {layer_of(b)})")
    in_circles = {(a, b) for comp in strongly_connected(graph) for a in comp for b in graph[a] if b in comp}
    upward = set(upward_edges(graph, layer_of))
    for a, b in sorted(allowed):
        if b not in graph.get(a, set()):
            problems.append(f"allowlisted edge {a} -> {b} no longer exists: take it off the allowlist")
        elif (a, b) not in in_circles and (a, b) not in upward:
            problems.append(f"allowlisted edge {a} -> {b} is no longer a violation: take it off the allowlist")
    return problems


def longest_chain(graph: Graph) -> list[str]:
    """The longest chain of imports A -> B -> ... between distinct modules, each circle counted as
    one step (a chain through a circle cannot go round it). Its length is the number of modules."""
    comps = strongly_connected(graph)
    rep = {m: m for m in graph}
    for c in comps:
        for m in c:
            rep[m] = c[0]
    dag: Graph = {}
    for a, bs in graph.items():
        dag.setdefault(rep[a], set()).update(rep[b] for b in bs if rep[b] != rep[a])
    best: dict[str, list[str]] = {}

    def chain(v: str) -> list[str]:
        if v not in best:
            # iterative deepening is not needed: the condensation is a DAG of some hundred nodes
            tails = [chain(w) for w in sorted(dag.get(v, ()))]
            best[v] = [v] + max(tails, key=len, default=[])
        return best[v]

    return max((chain(v) for v in sorted(dag)), key=len, default=[])
