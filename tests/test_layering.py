"""Package layering: sizing/ stays free of cloud SDKs; the CLI's plan path stays light;
no vendor number (spec, price) is typed into code; imports between the project's own modules go
down the layers (LAYERS) with no circles, except the edges on the ALLOWED list (today's violations,
to be emptied by the re-layer of issue 15), and the checker itself is tested on synthetic packages."""

from __future__ import annotations

import ast
import csv
import functools
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.blocked_imports import BLOCKER
from tests.import_graph import Graph, import_graph, layering_problems, longest_chain, strongly_connected

ROOT = Path(__file__).resolve().parents[1]
SIZING = ROOT / "sizing"
FORBIDDEN = ("pulumi", "pulumi_aws", "pulumi_kubernetes", "boto3", "botocore")
ADAPTERS = {SIZING / "adapters" / "aws.py"}  # the only boto3 adapter


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_sizing_imports_no_cloud_sdk() -> None:
    bad = []
    for py in SIZING.rglob("*.py"):
        if py in ADAPTERS:
            continue
        hit = _imports(py) & set(FORBIDDEN)
        # commands may import infra/pulumi lazily inside functions, never at module level
        top = {n.names[0].name.split(".")[0] if isinstance(n, ast.Import) else (n.module or "").split(".")[0]
               for n in ast.parse(py.read_text()).body if isinstance(n, (ast.Import, ast.ImportFrom))}
        if py.parent.name == "cli":
            hit = top & set(FORBIDDEN + ("infra",))
        if hit:
            bad.append(f"{py.relative_to(ROOT)}: {sorted(hit)}")
    assert not bad, "sizing/ imports a cloud SDK: " + "; ".join(bad)


HEAVY = ("pulumi", "pulumi_aws", "pulumi_kubernetes", "boto3", "botocore", "matplotlib", "httpx")
# `llmcap plan` in a Python where the optional extras (pyproject.toml) are not importable, as after
# `pip install llmcap`: a meta-path finder answers ModuleNotFoundError for them and records each attempt
# (an import tried and caught would otherwise pass unseen).
_PLAN_WITHOUT_EXTRAS = BLOCKER + """
import atexit
atexit.register(lambda: sys.stderr.write("tried: " + ",".join(TRIED) + "\\n"))
from sizing.cli import main
sys.argv = ["llmcap", "plan", "stacks/Pulumi.dev.yaml", "--format", "json"]
main()
"""


def test_plan_path_imports_stay_light(tmp_path: Path) -> None:
    code = ("import sys, sizing.cli, sizing.planning.planner, sizing.planning.builder, sizing.report.plan_views; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "", f"heavy modules on the plan path: {out.stdout}"
    # end to end: the README's first command works without the infra, aws, bench and plot extras, and plans
    # what the golden file shows (the bundled catalog, no overlay, no user cache)
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path), "COLUMNS": "200",
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    r = subprocess.run([sys.executable, "-c", _PLAN_WITHOUT_EXTRAS, ",".join(HEAVY)], capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=300)  # a hang guard only: the plan takes seconds
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr.splitlines()[-1] == "tried: ", f"the plan path tried to import an extra's module: {r.stderr}"
    assert r.stdout == (ROOT / "tests" / "golden" / "plan" / "dev" / "plan.json").read_text()


def _distinctive(v: float) -> bool:
    """Numbers that could be anything (0.1, 8, 130, 600) are not evidence; 0.8048, 989.5 or 2039 are."""
    if v != int(v):
        digits = f"{v:.10g}".replace("0.", "").lstrip("0").replace(".", "")
        return len(digits) >= 3
    return v >= 200 and v % 50 != 0


def _vendor_numbers() -> set[float]:
    vals: set[float] = set()
    data = SIZING / "data"
    cols = {"gpus.csv": ("memory_bandwidth_gbs", "bf16_dense_tflops", "fp8_dense_tflops", "int8_dense_tops",
                         "nvlink_bandwidth_gbs"),
            "prices.csv": ("usd_per_hour",), "api_prices.csv": ("input_usd_per_mtok", "output_usd_per_mtok"),
            "platform_prices.csv": ("usd",)}
    for name, fields in cols.items():
        with (data / name).open(newline="") as f:
            for r in csv.DictReader(f):
                for c in fields:
                    try:
                        v = float(r[c])
                    except (ValueError, KeyError):
                        continue
                    if _distinctive(v):
                        vals.add(v)
    return vals


def test_no_vendor_number_in_code() -> None:
    vendor = _vendor_numbers()
    assert len(vendor) > 50
    bad = []
    for base in (SIZING, ROOT / "infra"):
        for py in base.rglob("*.py"):
            for node in ast.walk(ast.parse(py.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                        and not isinstance(node.value, bool) and float(node.value) in vendor:
                    bad.append(f"{py.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert not bad, "vendor numbers typed into code: " + "; ".join(bad)


# ---------------------------------------------------------------------------- layers of own modules

# Low to high: a module may import its own layer (without circles) or a lower one. The longest
# matching prefix decides; a package's __init__ sits with its modules.
LAYERS: list[tuple[str, list[str]]] = [
    ("base: errors, user files, the spec models, the Plan contract",
     ["sizing", "sizing.errors", "sizing.user_files", "sizing.humanize", "sizing.spec", "sizing.deployment",
      "sizing.traffic", "sizing.stack", "sizing.plan"]),
    ("catalog: records, the one data reader, architectures, hub resolution", ["sizing.catalog"]),
    ("perf: memory, step physics, load, goodput, simulation, calibration", ["sizing.perf"]),
    ("cost: money, API comparison, resource pricing", ["sizing.cost"]),
    ("planning: demand, candidates, tuning, mixes, the planner, the plan builder, saved plans",
     ["sizing.planning"]),
    ("analyses, measurement and adapters: compare, diff, measure, AWS, git",
     ["sizing.analysis", "sizing.measure", "sizing.adapters"]),
    ("report: views of plans, compares, diffs", ["sizing.report"]),
    ("infra config: typed readers of infra/data, names, image references and locks", ["infra", "infra.config"]),
    ("infra by what it talks to: AWS resources, Kubernetes objects (neither imports the other)",
     ["infra.aws", "infra.kubernetes"]),
    ("infra karpenter: the node provisioner that talks to both (EC2NodeClass, NodePools, its IAM)",
     ["infra.karpenter"]),
    ("infra fit: the deployability check over what aws/ and kubernetes/ would create", ["infra.fit"]),
    ("infra entry points: the program, the offline render, the compose target",
     ["infra.program", "infra.render", "infra.compose", "infra.__main__"]),
    ("cli: commands (the only layer that imports infra, lazily)", ["sizing.cli"]),
]

# Edges allowed to break the rules above. Empty since the re-layer (issue 15): no circles, no upward import.
# The test fails when a listed edge stops being a violation, so the list can only shrink.
ALLOWED: set[tuple[str, str]] = set()


def layer_map(layers: list[tuple[str, list[str]]]) -> dict[str, int]:
    return {prefix: i for i, (_, prefixes) in enumerate(layers) for prefix in prefixes}


def layer_of_factory(layers: list[tuple[str, list[str]]]) -> Callable[[str], int]:
    table = layer_map(layers)

    def layer_of(module: str) -> int:
        parts = module.split(".")
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in table:
                return table[".".join(parts[:n])]
        raise KeyError(f"{module} is in no layer: add it to LAYERS in tests/test_layering.py")
    return layer_of


@functools.cache
def project_graph() -> Graph:
    """The import graph of sizing/ and infra/, built once per session (the tests only read it)."""
    return import_graph(ROOT, ["sizing", "infra"])


def test_every_module_has_a_layer() -> None:
    layer_of = layer_of_factory(LAYERS)
    for m in project_graph():
        layer_of(m)


def test_imports_go_down_the_layers_without_circles() -> None:
    problems = layering_problems(project_graph(), layer_of_factory(LAYERS), ALLOWED)
    assert not problems, "\n".join(problems)


def test_no_circles_in_type_only_imports_either() -> None:
    """`if TYPE_CHECKING:` imports are no run-time edge, but a circle through them is still two modules
    that cannot be understood apart: none."""
    g = import_graph(ROOT, ["sizing", "infra"], type_checking=True)
    assert not strongly_connected(g), strongly_connected(g)


def test_longest_import_chain_is_measured() -> None:
    """Issue 15: at most 8 levels of imports between the project's own modules, in sizing/ alone (the
    graph the issue measured at 14) and with infra/ (the CLI's render and diff import the Pulumi
    program). scripts/import_chain.py prints both chains."""
    g = project_graph()
    sizing_only = {m: {d for d in deps if d.split(".")[0] == "sizing"} for m, deps in g.items()
                   if m.split(".")[0] == "sizing"}
    for graph, where in ((sizing_only, "sizing/"), (g, "sizing/ and infra/")):
        chain = longest_chain(graph)
        print(f"longest import chain in {where}: {len(chain)} modules: {' -> '.join(chain)}")
        assert len(chain) <= MAX_CHAIN, " -> ".join(chain)


# today: 8 modules in both, TYPE_CHECKING imports left out (sizing/: cli -> a command -> the AWS adapter ->
# the catalog -> hub config -> architectures; with infra/: cli -> render/diff -> the program -> the app ->
# a component -> a manifest builder -> vllm_args -> settings)
MAX_CHAIN = 8


# ---------------------------------------------------------------------------- the checker itself


def synthetic(tmp: Path, files: dict[str, str]) -> Graph:
    for rel, text in files.items():
        f = tmp / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return import_graph(tmp, ["pkg"])


SYN_LAYERS = [("low", ["pkg", "pkg.low"]), ("mid", ["pkg.mid"]), ("high", ["pkg.high"])]


def test_checker_reads_every_kind_of_import(tmp_path: Path) -> None:
    g = synthetic(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low.py": "",
        "pkg/mid/__init__.py": "from . import b\n",
        "pkg/mid/a.py": "import pkg.low\nfrom .b import x\n",
        "pkg/mid/b.py": "def f():\n    from pkg.low import thing  # lazy\nx = 1\n",
        "pkg/high.py": "from typing import TYPE_CHECKING\nfrom pkg import mid\nif TYPE_CHECKING:\n"
                       "    from pkg.mid.a import y\n",
    })
    assert g == {"pkg": set(), "pkg.low": set(), "pkg.mid": {"pkg.mid.b"}, "pkg.mid.a": {"pkg.low", "pkg.mid.b"},
                 "pkg.mid.b": {"pkg.low"}, "pkg.high": {"pkg.mid"}}
    assert layering_problems(g, layer_of_factory(SYN_LAYERS), set()) == []


def test_checker_catches_a_circle(tmp_path: Path) -> None:
    g = synthetic(tmp_path, {"pkg/__init__.py": "", "pkg/mid/__init__.py": "",
                             "pkg/mid/a.py": "from pkg.mid import b\n", "pkg/mid/b.py": "import pkg.mid.a\n"})
    assert strongly_connected(g) == [["pkg.mid.a", "pkg.mid.b"]]
    problems = layering_problems(g, layer_of_factory(SYN_LAYERS), set())
    assert problems == ["import circle pkg.mid.a <-> pkg.mid.b: pkg.mid.a -> pkg.mid.b, pkg.mid.b -> pkg.mid.a"]
    assert layering_problems(g, layer_of_factory(SYN_LAYERS), {("pkg.mid.b", "pkg.mid.a")}) == []


def test_checker_catches_a_longer_circle_and_an_upward_import(tmp_path: Path) -> None:
    g = synthetic(tmp_path, {"pkg/__init__.py": "", "pkg/low.py": "def f():\n    import pkg.high\n",
                             "pkg/mid/__init__.py": "", "pkg/mid/a.py": "import pkg.mid.b\n",
                             "pkg/mid/b.py": "import pkg.mid.c\n", "pkg/mid/c.py": "import pkg.mid.a\n",
                             "pkg/high.py": "import pkg.low\n"})
    problems = layering_problems(g, layer_of_factory(SYN_LAYERS), set())
    assert any(p.startswith("import circle pkg.mid.a <-> pkg.mid.b <-> pkg.mid.c") for p in problems), problems
    assert any(p.startswith("import circle pkg.high <-> pkg.low") for p in problems), problems
    assert "upward import pkg.low (layer 0) -> pkg.high (layer 2)" in problems
    fixed = layering_problems(g, layer_of_factory(SYN_LAYERS), {("pkg.low", "pkg.high"), ("pkg.mid.c", "pkg.mid.a")})
    assert fixed == []


def test_checker_refuses_a_stale_allowlist(tmp_path: Path) -> None:
    g = synthetic(tmp_path, {"pkg/__init__.py": "", "pkg/low.py": "", "pkg/high.py": "import pkg.low\n"})
    problems = layering_problems(g, layer_of_factory(SYN_LAYERS), {("pkg.high", "pkg.low"), ("pkg.low", "pkg.mid")})
    assert problems == ["allowlisted edge pkg.high -> pkg.low is no longer a violation: take it off the allowlist",
                        "allowlisted edge pkg.low -> pkg.mid no longer exists: take it off the allowlist"]


def test_longest_chain_counts_a_circle_once(tmp_path: Path) -> None:
    g: Graph = {"a": {"b"}, "b": {"c"}, "c": {"b", "d"}, "d": set(), "e": {"a"}}
    assert longest_chain(g) == ["e", "a", "b", "d"]  # b and c are one step


@pytest.mark.parametrize("module", ["sizing.nowhere_new"])
def test_a_module_outside_every_layer_is_named(module: str) -> None:
    with pytest.raises(KeyError, match="sizing.nowhere_new is in no layer"):
        layer_of_factory(LAYERS[1:])(module)
