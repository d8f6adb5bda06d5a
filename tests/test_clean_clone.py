"""Issue 14, items 7 and 8, as a user meets them: a clean clone follows the README's cloud steps
literally up to `pulumi preview` (the Pulumi CLI is emulated: the virtualenv install of its pip
toolchain, the config it hands the program, the program run under Pulumi's mock engine), installs
its dependencies and deploys the SAVED plan; a `llmcap catalog refresh` cache and a calibration
overlay on the machine change nothing until `llmcap plan --write` is run again."""

from __future__ import annotations

import csv
import io
import re
import secrets as pysecrets
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi
import pytest
from typer.testing import CliRunner

from infra.config import exports
from sizing.planning.saved_plan import SavedPlan
from tests import pulumi_harness as h

ROOT = Path(__file__).resolve().parents[1]


def clean_clone(dest: Path) -> Path:
    """The files a `git clone` of this tree would have: tracked and untracked-but-not-ignored (no
    .venv, no egg-info, no caches)."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.split(b"\0")
    for raw in names:
        if not raw:
            continue
        rel = raw.decode()
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(src.read_bytes())
    return dest


def readme_cloud_steps(readme: Path) -> list[list[str]]:
    """The commands of the README's first bash block under "For cloud users", split on `&&`."""
    text = readme.read_text()
    section = text[text.index("## For cloud users"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README: no bash block under 'For cloud users'"
    steps = []
    lines = re.sub(r"\\\n\s*", " ", block.group(1)).splitlines()  # join `\` continuations
    for line in lines:
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if not line or line.startswith("#"):
            continue
        for part in line.split("&&"):
            if part.strip():
                steps.append(shlex.split(part.strip().replace('"$(openssl rand -hex 32)"', "OPENSSL_HEX_32")))
    return steps


# what the README's `$(...)` substitutions print, on a machine with AWS credentials
SHELL_VALUES = {
    "$(curl -s https://checkip.amazonaws.com)/32": "203.0.113.7/32",
    "$(aws secretsmanager describe-secret --secret-id ecr-pullthroughcache/docker-hub --query ARN --output text)":
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf",
}


def config_set_path(stack_file: Path, path: str, value: str) -> None:
    """`pulumi config set --path KEY.a.b[0] VALUE`: a plain (not secret) value written into the stack file."""
    import yaml

    doc = yaml.safe_load(stack_file.read_text()) or {}
    cfg = doc.setdefault("config", {})
    key, _, rest = path.partition(".")
    parts = [p for p in re.split(r"\.|\[(\d+)\]", rest) if p]
    node = cfg.setdefault(key, {})
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        nxt = parts[i + 1] if not last else None
        if part.isdigit():
            assert isinstance(node, list)
            idx = int(part)
            while len(node) <= idx:
                node.append(None)
            if last:
                node[idx] = value
            else:
                node[idx] = node[idx] or ([] if nxt and nxt.isdigit() else {})
                node = node[idx]
        elif last:
            node[part] = value
        else:
            node = node.setdefault(part, [] if nxt and nxt.isdigit() else {})
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def cli(project: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]) -> tuple[int, str]:
    from sizing.cli import app

    monkeypatch.chdir(project)
    r = CliRunner().invoke(app, args, env={"COLUMNS": "120", "NO_COLOR": "1"})
    return r.exit_code, r.output


def pip_toolchain_install(project: Path) -> str:
    """What Pulumi's pip toolchain does on a checkout without its virtualenv (Pulumi.yaml: toolchain
    pip, virtualenv .venv; pulumi/pulumi sdk/python/toolchain/pip.go EnsureVenv/InstallDependencies):
    `python -m venv .venv`, upgrade pip/setuptools/wheel, then "If `requirements.txt` doesn't exist,
    exit early", else `python -m pip install -r requirements.txt` in the project folder. Here: the
    same requirements resolved with --dry-run (no packages installed into this test's environment)."""
    import yaml

    project_file = yaml.safe_load((project / "Pulumi.yaml").read_text())
    assert project_file["runtime"]["options"] == {"toolchain": "pip", "virtualenv": ".venv"}
    assert not (project / ".venv").exists()
    req = project / "requirements.txt"
    assert req.is_file(), "no requirements.txt: Pulumi's pip toolchain would install nothing into .venv"
    return requirements_install(project)


def requirements_install(project: Path) -> str:
    """`pip install -r requirements.txt` in the project folder, resolved with --dry-run (no packages
    installed into this test's environment); pip's output."""
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--disable-pip-version-check",
                        "-r", "requirements.txt"], cwd=project, capture_output=True, text=True,
                       timeout=300)  # a hang guard: resolving takes seconds
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout


def follow_readme(project: Path, monkeypatch: pytest.MonkeyPatch, install: bool = True
                  ) -> tuple[str, list[h.RenderedResource], dict[str, Any], list[str]]:
    """Run the README's cloud steps through `pulumi preview` (the steps after it up to `pulumi up` are
    checked too); returns the stack, what the preview registers, the stack outputs, and the steps
    skipped (they need an AWS account)."""
    stack, secrets, skipped = None, {}, []
    preview: tuple[list[h.RenderedResource], dict[str, Any]] | None = None
    venv = activated = installed = False  # .venv made by the README; activated; requirements.txt installed
    for argv in readme_cloud_steps(project / "README.md"):
        if argv == ["python3", "-m", "venv", ".venv"]:
            venv = True
        elif argv in (["."] + [".venv/bin/activate"], ["source", ".venv/bin/activate"]):
            assert venv or preview is not None, "the README activates .venv before anything created it"
            activated = True
        elif argv == ["pip", "install", "-r", "requirements.txt"]:
            assert activated, "the README installs requirements.txt outside .venv"
            if install:
                out = requirements_install(project)
                assert "Would install llmcap-" in out, out[-2000:]
            installed = True
        elif argv[:2] == ["pulumi", "login"]:
            continue  # the state backend: nothing the program sees
        elif argv[:3] == ["pulumi", "stack", "select"]:
            stack = argv[3]
            assert (project / "stacks" / f"Pulumi.{stack}.yaml").is_file(), argv
        elif argv[:4] == ["pulumi", "config", "set", "--secret"]:
            secrets[argv[4]] = pysecrets.token_hex(32) if argv[5] == "OPENSSL_HEX_32" else argv[5]
        elif argv[:4] == ["pulumi", "config", "set", "--path"]:
            assert stack is not None, argv
            config_set_path(project / "stacks" / f"Pulumi.{stack}.yaml", argv[4], SHELL_VALUES.get(argv[5], argv[5]))
        elif argv[:2] == ["aws", "secretsmanager"]:
            skipped.append(" ".join(argv[:3]))  # creates the Docker Hub credential in the account
        elif argv[:2] == ["llmcap", "preflight"]:
            assert installed, "llmcap preflight needs boto3 (the aws extra) in .venv"
            skipped.append(" ".join(argv))  # AWS quotas (tests/test_aws_preflight.py runs it against moto)
        elif argv[0] == "llmcap":
            code, out = cli(project, monkeypatch, argv[1:])
            assert code == 0, (argv, out)
        elif argv[:2] == ["pulumi", "preview"]:
            assert stack is not None and argv[argv.index("-s") + 1] == stack
            if not venv:  # Pulumi's pip toolchain creates .venv and installs requirements.txt
                if install:
                    out = pip_toolchain_install(project)
                    assert "Would install llmcap-" in out, out[-2000:]
                venv = installed = True
            # with a .venv already there Pulumi installs nothing (pip.go, EnsureVenv: "if
            # IsVirtualEnv(p.virtualenvPath) { return nil }"): the program needs requirements.txt in it
            assert installed, "pulumi preview runs the program from a .venv without requirements.txt (pulumi)"
            preview = h.run_program_file(project, stack, secrets)
        elif argv[:2] == ["pulumi", "up"]:
            assert stack is not None and preview is not None, "pulumi up before pulumi preview"
            return stack, preview[0], preview[1], skipped
        else:
            raise AssertionError(f"README cloud step not emulated by this test: {' '.join(argv)}")
    raise AssertionError("README cloud steps never reach `pulumi up`")


def summary(resources: list[h.RenderedResource]) -> list[tuple[str, str, str]]:
    """Every resource with its inputs, comparable between two previews."""
    import json

    from infra.render import plain

    return sorted((r.type, r.name, json.dumps(plain(r.inputs), sort_keys=True)) for r in resources)


def no_local_data(monkeypatch: pytest.MonkeyPatch, home: Path) -> Path:
    """This machine's llmcap data lives under `home`: catalog cache and overlay start absent."""
    import sizing.catalog.checkpoint_metadata
    import sizing.catalog.lookup

    cache = home / ".cache" / "llmcap" / "catalog"
    monkeypatch.delenv("LLMCAP_CATALOG_DIR", raising=False)
    monkeypatch.setattr(sizing.catalog.lookup, "USER_CACHE_DIR", cache)
    monkeypatch.setattr(sizing.catalog.lookup, "_DEFAULT", {})
    monkeypatch.setattr(sizing.catalog.checkpoint_metadata, "CACHE_DIR", cache.parent / "checkpoints")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LLMCAP_CALIBRATION_OVERLAY", str(home / ".config" / "llmcap" / "calibration_overlay.json"))
    return cache


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    no_local_data(monkeypatch, tmp_path / "home")
    return clean_clone(tmp_path / "clone")


@pytest.mark.slow
def test_clean_clone_follows_the_readme_to_preview_and_deploys_the_saved_plan(
        clone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack, resources, outputs, skipped = follow_readme(clone, monkeypatch)
    saved = SavedPlan.model_validate_json((clone / "stacks" / f"Pulumi.{stack}.plan.json").read_text())
    assert outputs[exports.PLAN] == saved.plan.model_dump(mode="json")
    node_groups = [r for r in resources if r.type == h.NODE_GROUP and r.name.startswith(f"llmcap-{stack}-")
                   and r.name != f"llmcap-{stack}-system"]
    assert node_groups and skipped == ["aws secretsmanager create-secret",
                                       f"llmcap preflight stacks/Pulumi.{stack}.yaml"]


def test_preview_stops_with_one_line_when_the_stack_file_changed_or_has_no_saved_plan(
        clone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dev = clone / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("concurrent_users: 100", "concurrent_users: 300"))
    with pytest.raises(pulumi.RunError) as e:
        h.run_program_file(clone, "dev", {"llmcap:api_key": "k" * 64})
    assert str(e.value) == ("stacks/Pulumi.dev.yaml changed since its saved plan: run llmcap plan "
                            "stacks/Pulumi.dev.yaml --write and review the diff")
    (clone / "stacks" / "Pulumi.dev.plan.json").unlink()
    with pytest.raises(pulumi.RunError) as e:
        h.run_program_file(clone, "dev", {"llmcap:api_key": "k" * 64})
    assert str(e.value) == ("stacks/Pulumi.dev.yaml has no saved plan (stacks/Pulumi.dev.plan.json): run llmcap "
                            "plan stacks/Pulumi.dev.yaml --write and review it")


def _changed_catalog(cache: Path, saved: SavedPlan) -> None:
    """What a `llmcap catalog refresh` could bring: the planned instance type 3× dearer and offered in
    one AZ fewer, every other type as bundled."""
    from sizing.catalog.paths import BUNDLED_DIR

    cache.mkdir(parents=True)
    planned = {p.instance_type for p in saved.plan.pools}
    for name, edit in (("prices.csv", "usd_per_hour"), ("offerings.csv", None)):
        rows = list(csv.DictReader(io.StringIO((BUNDLED_DIR / name).read_text())))
        dropped = False
        out = []
        for r in rows:
            if r["instance_type"] in planned and r["region"] == saved.plan.region:
                if edit:
                    r[edit] = f"{float(r[edit]) * 3:.4f}"
                elif not dropped:
                    dropped = True
                    continue
            out.append(r)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(out)
        (cache / name).write_text(buf.getvalue())


@pytest.mark.slow  # a clean clone run three times under the mock engine (about 4 CPU s)
def test_catalog_refresh_and_calibration_change_nothing_until_plan_write(
        clone: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sizing.perf.overlay import Overlay, OverlayEntry, overlay_path

    # the README cloud block sets both secrets; dev serves a gated Meta checkpoint, so the fit check needs the token
    secrets = {"llmcap:api_key": "k" * 64, "llmcap:hf_token": "hf_" + "t" * 34}
    # the README's deployment settings (the EKS API from this address, the Docker Hub credential), saved
    stack_file = clone / "stacks" / "Pulumi.dev.yaml"
    config_set_path(stack_file, "llmcap:deployment.cluster_endpoint_public_access_cidrs[0]", "203.0.113.7/32")
    config_set_path(stack_file, "llmcap:deployment.docker_hub_credential_arn",
                    "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf")
    code, out = cli(clone, monkeypatch, ["plan", "stacks/Pulumi.dev.yaml", "--write"])
    assert code == 0, out
    before, _ = h.run_program_file(clone, "dev", secrets)
    saved = SavedPlan.model_validate_json((clone / "stacks" / "Pulumi.dev.plan.json").read_text())
    # the machine refreshes its catalog and records a (poor) measurement of the planned pool
    _changed_catalog(tmp_path / "home" / ".cache" / "llmcap" / "catalog", saved)
    pool = saved.plan.pools[0]
    Overlay(entries=[OverlayEntry(gpu=pool.gpu, engine="vllm", model=pool.vllm.model, goodput_scale=0.5,
                                  measured_goodput_output_tokens_per_s_per_replica=1.0,
                                  predicted_goodput_output_tokens_per_s_per_replica=2.0)]).save(overlay_path())
    code, fresh = cli(clone, monkeypatch, ["plan", "stacks/Pulumi.dev.yaml", "--format", "json"])
    assert code == 0 and fresh.strip() != saved.plan.to_json().strip()  # a plan made now would differ

    after, outputs = h.run_program_file(clone, "dev", secrets)
    assert summary(after) == summary(before), "a catalog refresh/overlay changed what pulumi preview creates"
    assert outputs[exports.PLAN] == saved.plan.model_dump(mode="json")

    code, out = cli(clone, monkeypatch, ["plan", "stacks/Pulumi.dev.yaml", "--write"])
    assert code == 0 and "wrote stacks/Pulumi.dev.plan.json (catalog from " in out, out
    rewritten, outputs = h.run_program_file(clone, "dev", secrets)
    assert summary(rewritten) != summary(before)
    new = SavedPlan.model_validate_json((clone / "stacks" / "Pulumi.dev.plan.json").read_text())
    assert outputs[exports.PLAN] == new.plan.model_dump(mode="json") != saved.plan.model_dump(mode="json")
