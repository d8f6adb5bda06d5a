"""Golden files for everything a person reads, for every bundled stack (the safety net of issue 15):

- tests/golden/plan/<stack>/: `llmcap plan` as a table at 80 and at 200 columns, markdown, JSON
- tests/golden/vllm/<stack>/: the `vllm serve` arguments of each pool, as the manifests carry them
- tests/golden/render/<stack>/: what `llmcap render` writes (resources.json, outputs.json, manifests/, helm/)
- tests/golden/compose/<stack>/: what `llmcap render --target compose` writes (or its one-line refusal)

Every run is hermetic: the bundled catalog (no user cache), no calibration overlay, a pinned width.
Rewrite with `bash scripts/update_goldens.sh` and review the diff."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.golden_files import GOLDEN_DIR, check_golden_dir

ROOT = Path(__file__).resolve().parents[1]
STACK_FILES = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
STACK_IDS = [p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in STACK_FILES]


@pytest.fixture(autouse=True)
def hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    import sizing.catalog.lookup

    empty = tmp_path_factory.mktemp("no-user-state")
    monkeypatch.delenv("LLMCAP_CATALOG_DIR", raising=False)
    monkeypatch.setattr(sizing.catalog.lookup, "USER_CACHE_DIR", empty / "no-catalog")
    monkeypatch.setenv("LLMCAP_CALIBRATION_OVERLAY", str(empty / "no-overlay.json"))
    monkeypatch.chdir(ROOT)
    yield


def cli(args: list[str], columns: int = 200) -> tuple[int, str]:
    from sizing.cli import app

    r = CliRunner().invoke(app, args, env={"COLUMNS": str(columns), "NO_COLOR": "1", "TERM": "dumb"})
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    return r.exit_code, r.output


def _stack_arg(stack_id: str) -> str:
    return f"stacks/Pulumi.{stack_id}.yaml"


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_plan_outputs(stack_id: str, update_golden: bool) -> None:
    files: dict[str, str] = {}
    for name, args, columns in (("table-80.txt", [], 80), ("table-200.txt", [], 200),
                                ("plan.md", ["--format", "markdown"], 200),
                                ("plan.json", ["--format", "json"], 200)):
        code, out = cli(["plan", _stack_arg(stack_id), *args], columns)
        if name.endswith(".json"):
            assert code in (0, 3), out
            files[name] = out
        else:
            command = f"$ llmcap plan {_stack_arg(stack_id)} {' '.join(args)}".rstrip()
            files[name] = f"{command}   # COLUMNS={columns}, exit {code}\n{out}"
    assert str(ROOT) not in "".join(files.values()), "an absolute path leaked into the output"
    check_golden_dir(GOLDEN_DIR / "plan" / stack_id, files, update_golden)


def _serve_args(objs: list[dict]) -> dict[str, str]:  # type: ignore[type-arg]
    """pool workload name → `vllm serve` command lines of its containers (one flag per line)."""
    out: dict[str, str] = {}
    for o in objs:
        if o["kind"] not in ("Deployment", "LeaderWorkerSet") or not o["metadata"]["name"].startswith("vllm"):
            continue
        if o["kind"] == "Deployment":
            templates = [("", o["spec"]["template"])]
        else:
            lwt = o["spec"]["leaderWorkerTemplate"]
            templates = [("leader", lwt["leaderTemplate"]), ("worker", lwt["workerTemplate"])]
        text = []
        for role, tpl in templates:
            for c in tpl["spec"]["containers"]:
                argv = c.get("args", [])
                lines, i = [shlex.join(c.get("command", []))], 0
                while i < len(argv):
                    a = argv[i]
                    if a.startswith("--") and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                        lines.append(f"{shlex.quote(a)} {shlex.quote(argv[i + 1])}")
                        i += 2
                    else:
                        lines.append(shlex.quote(a))
                        i += 1
                head = f"# {o['kind']} {o['metadata']['name']}" + (f" ({role})" if role else "") + \
                    f", container {c['name']}\n"
                text.append(head + " \\\n    ".join(lines) + "\n")
        out[f"{o['metadata']['name']}.sh"] = "\n".join(text)
    return out


def _read_tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_render_and_vllm_args(stack_id: str, tmp_path: Path, update_golden: bool) -> None:
    from infra.kubernetes.manifests import kubernetes_objects
    from infra.render import write_render
    from tests.k8s_support import rendered

    result, resources = rendered(stack_id)
    write_render(result, tmp_path / "out")
    files = _read_tree(tmp_path / "out")
    assert str(tmp_path) not in "".join(files.values()) and str(ROOT) not in "".join(files.values())
    check_golden_dir(GOLDEN_DIR / "render" / stack_id, files, update_golden)
    args = _serve_args(kubernetes_objects(resources))
    assert args, "no vLLM workload rendered"
    check_golden_dir(GOLDEN_DIR / "vllm" / stack_id, args, update_golden)


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_compose_outputs(stack_id: str, tmp_path: Path, update_golden: bool) -> None:
    out = tmp_path / "compose"
    code, text = cli(["render", _stack_arg(stack_id), "--target", "compose", "--out", str(out)])
    files = _read_tree(out) if out.is_dir() else {}
    files["stdout.txt"] = f"exit {code}\n" + text.replace(str(tmp_path), "$OUT")
    if code != 0:
        assert not out.exists() or not any(out.iterdir()), "a refused render wrote files"
    check_golden_dir(GOLDEN_DIR / "compose" / stack_id, files, update_golden)
