"""Optional extras (issue 15 step 7): `pip install llmcap` for planning pulls no Pulumi SDK and no boto3;
the Pulumi program's requirements.txt installs what `pulumi up` and the README's cloud block need; a
command whose extra is missing says which in one line (exit 2), never a traceback. That the plan path
runs with the extras absent: tests/test_layering.py::test_plan_path_imports_stay_light."""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from sizing.cli.extras import EXTRA_OF, extra_missing_in
from tests.blocked_imports import BLOCKER

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
HEAVY = {"pulumi", "pulumi-aws", "pulumi-kubernetes", "boto3", "botocore", "httpx", "matplotlib"}


def _name(req: str) -> str:
    return re.sub(r"[-_.]+", "-", Requirement(req).name).lower()


def _names(reqs: list[str]) -> set[str]:
    return {_name(r) for r in reqs}


def _extras() -> dict[str, set[str]]:
    return {k: _names(v) for k, v in PYPROJECT["optional-dependencies"].items()}


def test_base_dependencies_pull_no_cloud_sdk_and_extras_do() -> None:
    base = _names(PYPROJECT["dependencies"])
    assert base & HEAVY == set(), f"base dependencies pull {sorted(base & HEAVY)}: move them to an extra"
    extras = _extras()
    assert extras["infra"] == {"pulumi", "pulumi-aws", "pulumi-kubernetes", "pulumi-tls"}
    assert extras["aws"] == {"boto3"} and extras["bench"] == {"httpx"} and extras["plot"] == {"matplotlib"}
    # dev is every extra and the tools (.ci/run: pip install -e ".[dev]"), but vllm-check: vLLM and torch are
    # several GB, and its one test (tests/test_sched_vs_vllm.py) is skipped with the reason without them
    [self_ref] = [Requirement(r) for r in PYPROJECT["optional-dependencies"]["dev"] if _name(r) == "llmcap"]
    assert self_ref.extras == set(extras) - {"dev", "vllm-check"}
    assert extras["vllm-check"] == {"vllm", "torch"}


@functools.cache
def _packages() -> dict[str, list[str]]:
    return dict(metadata.packages_distributions())  # scans every installed distribution: once


def _dist_of(module: str) -> set[str]:
    return {re.sub(r"[-_.]+", "-", d).lower() for d in _packages().get(module, [])}


def test_the_missing_extra_table_matches_pyproject() -> None:
    """sizing/cli/extras.EXTRA_OF names, per import name, the extra that installs its distribution
    (directly, or as a dependency of one it lists: botocore comes with boto3)."""
    extras = _extras()
    for module, extra in EXTRA_OF.items():
        dists = _dist_of(module)
        assert dists, f"{module} is not installed here (pip install -e '.[dev]')"
        listed = extras[extra]
        pulled = listed | {_name(r) for d in listed for r in (metadata.requires(d) or [])
                           if "extra ==" not in r}
        assert dists & pulled, f"EXTRA_OF[{module!r}] = {extra!r}, but {extra} installs {sorted(listed)}"
    # and every package of the non-dev extras has its line (a missing one would show a traceback)
    for extra in ("infra", "aws", "bench", "plot"):
        for dist in extras[extra]:
            mods = {m for m, ds in _packages().items()
                    if dist in {re.sub(r"[-_.]+", "-", d).lower() for d in ds} and not m.startswith("_")}
            assert mods & set(EXTRA_OF), f"{dist} ({extra}): none of its modules {sorted(mods)} is in EXTRA_OF"


def test_only_an_extras_module_becomes_the_one_line_error() -> None:
    assert extra_missing_in(ModuleNotFoundError("x", name="pulumi_aws.eks")) == "pulumi_aws"
    assert extra_missing_in(ModuleNotFoundError("x", name="sizing.nope")) is None  # a bug keeps its traceback
    assert extra_missing_in(ModuleNotFoundError("x")) is None


def _third_party_imports(folder: Path) -> set[str]:
    """Top-level modules imported anywhere under `folder` (lazy imports too), outside the stdlib and
    this project."""
    out: set[str] = set()
    for py in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(py.read_text())):
            if isinstance(node, ast.Import):
                out |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.add(node.module.split(".")[0])
    return out - set(sys.stdlib_module_names) - {"sizing", "infra", "__future__"}


def _requirement_extras() -> set[str]:
    lines = [ln.strip() for ln in (ROOT / "requirements.txt").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    assert len(lines) == 1 and lines[0].startswith("-e ."), lines
    m = re.fullmatch(r"-e \.(?:\[([a-z,]+)\])?", lines[0])
    assert m, lines[0]
    return set((m.group(1) or "").split(",")) - {""}


def test_requirements_txt_installs_what_the_program_and_the_readme_need() -> None:
    """Pulumi's pip toolchain installs requirements.txt into .venv and runs infra/__main__.py there; the
    README's cloud block also runs `llmcap preflight` (boto3) from that .venv."""
    extras = _requirement_extras()
    wanted = _names(PYPROJECT["dependencies"]) | set().union(*(_extras()[e] for e in extras))
    pulled = wanted | {_name(r) for d in wanted for r in (metadata.requires(d) or []) if "extra ==" not in r}
    missing = {m: sorted(_dist_of(m)) for m in _third_party_imports(ROOT / "infra") if not _dist_of(m) & pulled}
    assert not missing, f"infra/ imports modules requirements.txt ({sorted(extras)}) does not install: {missing}"
    readme = (ROOT / "README.md").read_text()
    cloud = readme[readme.index("## For cloud users"):]
    if "llmcap preflight" in cloud.split("```")[1]:
        assert "aws" in extras, "the README runs llmcap preflight from .venv: requirements.txt needs the aws extra"


RUN_COMMANDS = BLOCKER + """
import json
from typer.testing import CliRunner
from sizing.cli import app
out = []
for args in json.loads(sys.argv[2]):
    r = CliRunner().invoke(app, args, env={"COLUMNS": "120", "NO_COLOR": "1"})
    out.append({"args": args, "code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr,
                "exception": repr(r.exception) if r.exception and not isinstance(r.exception, SystemExit) else ""})
print(json.dumps(out))
"""


def _run_blocked(blocked: set[str], commands: list[list[str]], tmp_path: Path) -> list[dict[str, object]]:
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path / "home"),
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    r = subprocess.run([sys.executable, "-c", RUN_COMMANDS, ",".join(sorted(blocked)), json.dumps(commands)],
                       cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)  # a hang guard only: the commands stop before any network or plan
    assert r.returncode == 0, r.stderr[-3000:]
    return list(json.loads(r.stdout.splitlines()[-1]))


def test_a_command_whose_extra_is_missing_says_which_in_one_line(tmp_path: Path) -> None:
    blocked = set(EXTRA_OF)
    cases = [
        (["render", "stacks/Pulumi.dev.yaml", "--out", str(tmp_path / "r")], "llmcap render needs pulumi", "infra",
         tmp_path / "r"),
        (["catalog", "refresh", "--out", str(tmp_path / "cat")], "llmcap catalog refresh needs boto3", "aws",
         tmp_path / "cat"),
        (["preflight", "stacks/Pulumi.dev.yaml"], "llmcap preflight needs boto3", "aws", None),
        (["bench", "http://127.0.0.1:9", "--stack", "stacks/Pulumi.dev.yaml", "--out", str(tmp_path / "b.json")],
         "llmcap bench needs httpx", "bench", tmp_path / "b.json"),
        (["eval", "http://127.0.0.1:9", "--reference", "http://127.0.0.1:8", "--results", str(tmp_path / "e.jsonl")],
         "llmcap eval needs httpx", "bench", tmp_path / "e.jsonl"),
    ]
    results = _run_blocked(blocked, [c[0] for c in cases], tmp_path)
    for (args, says, extra, written), r in zip(cases, results, strict=True):
        assert r["exception"] == "" and "Traceback" not in f"{r['stdout']}{r['stderr']}", r
        lines = [ln for ln in str(r["stderr"]).splitlines() if ln.strip()]
        assert r["code"] == 2 and len(lines) == 1, r
        assert lines[0].startswith(f"error: {says}, which is not installed: ") and \
            lines[0].endswith(f"pip install 'llmcap[{extra}]'"), lines[0]
        assert r["stdout"] == "", r  # refused before planning or printing anything
        assert written is None or not written.exists(), f"{args}: wrote {written}"


def test_compose_renders_without_pulumi(tmp_path: Path) -> None:
    """`llmcap render --target compose` is pure (no Pulumi program), so it runs without the infra extra."""
    [r] = _run_blocked({"pulumi", "pulumi_aws", "pulumi_kubernetes", "boto3", "botocore"},
                       [["render", "stacks/Pulumi.dev.yaml", "--target", "compose", "--out", str(tmp_path / "c")]],
                       tmp_path)
    assert r["code"] == 0 and r["exception"] == "", r
    assert (tmp_path / "c" / "docker-compose.yml").is_file()


@pytest.mark.slow  # builds the project's metadata with pip (an isolated build environment: seconds, network)
def test_pip_metadata_lists_cloud_sdks_only_under_extras(tmp_path: Path) -> None:
    """What a user's pip sees: `pip install --dry-run --no-deps --report` of this project; its
    Requires-Dist (importlib.metadata.requires of the installed distribution reads the same field)."""
    report = tmp_path / "report.json"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--quiet",
                        "--disable-pip-version-check", "--report", str(report), str(ROOT)],
                       capture_output=True, text=True, timeout=600)  # a hang guard: seconds when pip's cache is warm
    assert r.returncode == 0, r.stderr[-3000:]
    [dist] = json.loads(report.read_text())["install"]
    requires = [Requirement(x) for x in dist["metadata"]["requires_dist"]]
    base = {_name(str(q)) for q in requires if q.marker is None}
    assert base and base & HEAVY == set(), sorted(base)
    by_extra: dict[str, set[str]] = {}
    for q in requires:
        if q.marker is not None:
            extra = re.search(r'extra == "([a-z-]+)"', str(q.marker))
            assert extra, str(q)
            by_extra.setdefault(extra.group(1), set()).add(re.sub(r"[-_.]+", "-", q.name).lower())
    assert {"pulumi", "pulumi-aws", "pulumi-kubernetes"} <= by_extra["infra"] and "boto3" in by_extra["aws"]
    assert set(dist["metadata"]["provides_extra"]) == {"infra", "aws", "bench", "plot", "dev", "vllm-check"}


def test_plan_preflight_without_boto3_still_plans_and_says_why_it_skipped(tmp_path: Path) -> None:
    """Issue 27: `plan --preflight` without the aws extra failed the whole plan; preflight is advice on top."""
    [r] = _run_blocked({"boto3", "botocore"}, [["plan", "stacks/Pulumi.dev.yaml", "--preflight", "--format", "json"]],
                       tmp_path)
    assert r["code"] == 0 and r["exception"] == "", r
    doc = json.loads(str(r["stdout"]))
    skipped = [w for w in doc["warnings"] if w.startswith("preflight skipped: ")]
    assert skipped and skipped[0].endswith("pip install 'llmcap[aws]'"), doc["warnings"]
