"""The Kubernetes side's component tree (issue 15 step 6): one ComponentResource per concern under
`llmcap:infra:KubernetesApp`, every resource that moved out of the app's direct children carrying a
Pulumi alias to the URN it had there (so `pulumi up` on a live stack moves it in the state instead
of replacing it), the Pulumi options that no golden file shows (custom timeouts, ignore_changes)
unchanged, and the pure manifest builders free of pulumi."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from infra.render import PROJECT
from sizing.plan import Plan
from sizing.stack import Stack, load_stack
from tests import pulumi_harness as h
from tests.plan_factory import make_plan, make_pool

ROOT = Path(__file__).resolve().parents[1]
APP = "llmcap:infra:KubernetesApp"


def _two_checkpoints() -> tuple[Stack, Plan]:
    base = "meta-llama/Meta-Llama-3-8B-Instruct"
    awq = "casperhansen/llama-3-8b-instruct-awq"
    a = make_pool(name="g6-12xlarge", model=base, precision="fp16")
    b = make_pool(name="g6e-xlarge", instance_type="g6e.xlarge", gpu="L40S", gpus_per_instance=1,
                  replicas=2, replicas_per_instance=1, instances_min=2, instances_desired=2, instances_max=3,
                  model=awq, precision="int4-awq", local_nvme_gb=250)
    return load_stack(ROOT / "stacks" / "Pulumi.dev.yaml"), make_plan([a, b], stack="dev")


def _bundled(name: str) -> tuple[Stack, Plan]:
    from sizing.planning.planner import plan_stack

    stack = load_stack(ROOT / "stacks" / f"Pulumi.{name}.yaml")
    return stack, plan_stack(stack, h.catalog())


CASES = {"dev": lambda: _bundled("dev"), "llama405b": lambda: _bundled("llama405b"),  # LWS, multi-node
         "two-checkpoints": _two_checkpoints}


@cache
def _registered(case: str) -> tuple[Stack, list[h.Registration], h.EngineUrns]:
    stack, plan = CASES[case]()
    regs = h.registrations(stack, plan)
    return stack, regs, h.EngineUrns(regs, stack.name, PROJECT)


def _in_app(urns: h.EngineUrns, regs: list[h.Registration]) -> list[h.Registration]:
    return [r for r in regs if urns.urn(r).split("::")[2].startswith(APP + "$")]


# resources added after the split: they never had a URN under the app, so there is nothing to alias
NEW_SINCE_THE_SPLIT = {("kubernetes:batch/v1:Job", "job-llmcap-smoke")}  # issue 32: the smoke Job


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_resource_keeps_the_urn_it_had_as_a_child_of_the_app(case: str) -> None:
    """Before the split every Kubernetes resource was a direct child of the one KubernetesApp, so its
    URN was urn:pulumi:<stack>::llmcap::llmcap:infra:KubernetesApp$<type>::<name>. Each one must still
    answer to that URN: as its own (still a direct child) or through an alias (moved into a component)."""
    stack, regs, urns = _registered(case)
    app = [r for r in regs if r.type == APP]
    assert len(app) == 1
    old_prefix = f"urn:pulumi:{stack.name}::{PROJECT}::{APP}$"
    children = [r for r in _in_app(urns, regs) if r.custom]
    assert len(children) > 20, [r.name for r in children]
    lost = []
    for r in children:
        if (r.type, r.name) in NEW_SINCE_THE_SPLIT:
            continue
        old = f"{old_prefix}{r.type}::{r.name}"
        if urns.urn(r) != old and old not in urns.alias_urns(r):
            lost.append(f"{r.type} {r.name}: now {urns.urn(r)}, aliases {urns.alias_urns(r)}")
    assert not lost, "re-parented without an alias to the old URN (a live stack would replace them):\n" + \
        "\n".join(lost)


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_component_per_concern(case: str) -> None:
    """Pools, router, observability and each weights copy are components under the app; the app keeps
    only the namespace, its policies, accounts, secrets and the cluster add-ons."""
    stack, regs, urns = _registered(case)
    _, plan = CASES[case]()
    by_mock = {r.mock_urn: r for r in regs}
    app = next(r for r in regs if r.type == APP)

    def children_of(parent: h.Registration) -> list[h.Registration]:
        return [r for r in regs if r.parent == parent.mock_urn]

    components = {r.type: [] for r in children_of(app) if not r.custom}
    for r in children_of(app):
        if not r.custom:
            components[r.type].append(r)
    assert sorted(components) == sorted(f"llmcap:infra:{t}" for t in (
        "ServingPool", "Router", "Observability", "WeightsJob", "SmokeJob"))
    assert len(components["llmcap:infra:ServingPool"]) == len(plan.pools)
    assert len(components["llmcap:infra:WeightsJob"]) == len({p.vllm.model for p in plan.pools})
    for pool_component in components["llmcap:infra:ServingPool"]:
        kinds = sorted(r.type for r in children_of(pool_component))
        assert kinds in (
            sorted(["kubernetes:apps/v1:Deployment", "kubernetes:policy/v1:PodDisruptionBudget",
                    "kubernetes:keda.sh/v1alpha1:ScaledObject"]),
            sorted(["kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet",
                    "kubernetes:policy/v1:PodDisruptionBudget", "kubernetes:keda.sh/v1alpha1:ScaledObject"])), kinds
    for job in components["llmcap:infra:WeightsJob"] + components["llmcap:infra:SmokeJob"]:
        assert [r.type for r in children_of(job)] == ["kubernetes:batch/v1:Job"]
    router = components["llmcap:infra:Router"][0]
    assert "kubernetes:core/v1:Service" in {r.type for r in children_of(router)}
    obs = components["llmcap:infra:Observability"][0]
    assert {r.name for r in children_of(obs)} >= {"kube-prometheus-stack", "namespace-monitoring"}
    direct = sorted({r.type for r in children_of(app) if r.custom})
    assert direct == sorted(["kubernetes:core/v1:Namespace", "kubernetes:networking.k8s.io/v1:NetworkPolicy",
                             "kubernetes:core/v1:ServiceAccount", "kubernetes:core/v1:Secret",
                             "kubernetes:helm.sh/v3:Release"]), direct
    # nothing of the app's tree hangs anywhere else
    assert all(by_mock.get(r.parent) is not None for r in _in_app(urns, regs))


# the options no golden file shows, as the program set them before the split (wait = the rollout budget
# of infra/kubernetes/serving.py plus 600 s, in whole minutes; the copy Job: its 6 h activeDeadlineSeconds)
OPTIONS = {
    "dev": {"deployment-vllm-g6e-xlarge": (("24m", "24m"), ("spec.replicas",)),
            "job-weights-copy": (("360m", "360m"), ())},
    "llama405b": {"leaderworkerset-vllm-p5-48xlarge": (("52m", "52m"), ("spec.replicas",)),
                  "job-weights-copy": (("360m", "360m"), ())},
}


@pytest.mark.parametrize("case", sorted(OPTIONS))
def test_timeouts_and_ignored_changes_stay_as_they_were(case: str) -> None:
    _, regs, _ = _registered(case)
    got = {r.name: (r.timeouts, r.ignore_changes) for r in regs if r.name in OPTIONS[case]}
    assert got == OPTIONS[case]
    grafana = [r for r in regs if r.name == "secret-grafana-admin"]
    assert [r.ignore_changes for r in grafana] == [("stringData",)]


# what each resource of the dev stack waits for, as registered before the split (names; the bucket
# comes in through the Output its spec reads)
DEV_WAITS = {
    'configmap-llmcap-dashboard': ['namespace-llmcap'],
    # issue 32: the router is ready only with an engine, so it waits for the pools' workloads
    'deployment-llmcap-router': ['deployment-vllm-g6e-xlarge', 'namespace-llmcap', 'secret-hf-token',
                                 'secret-vllm-api-key'],
    'deployment-vllm-g6e-xlarge': ['job-weights-copy', 'llmcap-dev-weights', 'nvidia-device-plugin'],
    'dcgm-exporter': [],  # issue 32: GPU utilisation and memory for the dashboard
    'job-weights-copy': ['llmcap-dev-weights', 'nvidia-device-plugin', 'secret-hf-token', 'secret-vllm-api-key',
                         'serviceaccount-vllm', 'serviceaccount-weights-loader'],
    # issue 32: the smoke Job, after every workload, the router, the key and the policies it needs
    'job-llmcap-smoke': ['deployment-llmcap-router', 'deployment-vllm-g6e-xlarge', 'networkpolicy-allow-dns',
                         'networkpolicy-default-deny', 'networkpolicy-router', 'networkpolicy-smoke-job',
                         'networkpolicy-vllm-g6e-xlarge', 'networkpolicy-weights-job', 'secret-hf-token',
                         'secret-vllm-api-key', 'service-llmcap-router'],
    'keda': [],
    'kube-prometheus-stack': ['namespace-monitoring', 'secret-grafana-admin', 'storageclass-llmcap-gp3'],
    'namespace-llmcap': [],
    'namespace-monitoring': [],
    'networkpolicy-allow-dns': ['namespace-llmcap'],
    'networkpolicy-default-deny': ['namespace-llmcap'],
    'networkpolicy-router': ['namespace-llmcap'],
    'networkpolicy-smoke-job': ['namespace-llmcap'],
    'networkpolicy-vllm-g6e-xlarge': ['namespace-llmcap'],
    'networkpolicy-weights-job': ['namespace-llmcap'],
    'nvidia-device-plugin': [],
    'poddisruptionbudget-llmcap-router': ['namespace-llmcap'],
    'poddisruptionbudget-vllm-g6e-xlarge': ['namespace-llmcap'],
    'podmonitor-vllm': ['kube-prometheus-stack', 'namespace-llmcap'],
    'role-llmcap-router': ['namespace-llmcap'],
    'rolebinding-llmcap-router': ['namespace-llmcap'],
    'scaledobject-vllm-g6e-xlarge': ['keda', 'kube-prometheus-stack', 'namespace-llmcap'],
    'secret-grafana-admin': ['namespace-monitoring'],
    'secret-hf-token': ['namespace-llmcap'],
    'secret-vllm-api-key': ['namespace-llmcap'],
    # the created endpoint certificate's ARN is in its annotations (issue 32)
    'service-llmcap-router': ['aws-load-balancer-controller', 'llmcap-dev-endpoint', 'namespace-llmcap'],
    'storageclass-llmcap-gp3': [],  # issue 32: Prometheus's volume
    'serviceaccount-llmcap-router': ['namespace-llmcap'],
    'serviceaccount-vllm': ['namespace-llmcap'],
    'serviceaccount-weights-loader': ['namespace-llmcap'],
}


def test_dependencies_stay_as_they_were() -> None:
    """The components must neither lose an edge the app had nor add one (a component in depends_on
    would stand for all its children)."""
    _, regs, urns = _registered("dev")
    by_mock = {r.mock_urn: r for r in regs}
    got = {r.name: sorted(by_mock[d].name for d in r.dependencies) for r in _in_app(urns, regs) if r.custom}
    assert got == DEV_WAITS


# infra/ grouped by what it talks to (issue 32 part 5): config/ (typed readers of infra/data, names, image
# references and locks), kubernetes/ (manifest and Helm-value builders; its components/ create them), aws/
# (ComponentResources of AWS resources, plus pure AWS builders), fit/ (the deployability check), and on top
# program.py, render.py, compose.py. Pure: everything in config/, fit/ and kubernetes/ outside components/,
# compose.py, and the AWS builders named here.
PURE_AWS = ("efa",)


def _modules(group: str) -> list[str]:
    return sorted(f"infra.{group}.{p.stem}" for p in (ROOT / "infra" / group).glob("*.py") if p.stem != "__init__")


def pure_modules() -> list[str]:
    return [*_modules("config"), *_modules("fit"), *_modules("kubernetes"), "infra.compose", "infra.karpenter.nodes",
            *(f"infra.aws.{m}" for m in PURE_AWS)]


def test_pure_builders_import_no_pulumi() -> None:
    """The manifest builders shared by the Pulumi program, `llmcap render` and the compose target are
    plain functions: a fresh interpreter that imports them all has no pulumi module loaded."""
    pure = pure_modules()
    assert len(pure) > 25 and "infra.kubernetes.serving" in pure and "infra.fit.check" in pure
    code = ("import importlib, json, sys\n"
            f"for m in {pure!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pulumi', 'pulumi_aws', 'pulumi_kubernetes', 'pulumi_tls', 'boto3'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(out.stdout) == [], f"a pure builder pulls in a cloud SDK: {out.stdout}"
    # nothing but the entry points sits flat in infra/ any more
    flat = {p.stem for p in (ROOT / "infra").glob("*.py")} - {"__init__"}
    assert flat == {"__main__", "program", "render", "compose"}, sorted(flat)


def test_aws_and_kubernetes_do_not_import_each_other() -> None:
    """infra/aws/ talks to AWS, infra/kubernetes/ to the cluster; both read infra/config/ and neither reads the
    other (the program wires their outputs together)."""
    from tests.import_graph import import_graph

    g = import_graph(ROOT, ["infra"])
    bad = [f"{m} -> {d}" for m, deps in g.items() for d in deps
           for a, b in (("infra.aws", "infra.kubernetes"), ("infra.kubernetes", "infra.aws"))
           if (m == a or m.startswith(a + ".")) and (d == b or d.startswith(b + "."))]
    assert not bad, bad


# --- infra/data/serving.yaml through its one typed loader ------------------------------------------

def test_serving_policy_rejects_a_misspelt_or_missing_key_in_one_line() -> None:
    import copy

    import yaml

    from infra.config import settings

    path = settings.DATA_DIR / "serving.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert settings.parse_policy(doc, path) == settings.policy()
    typo = copy.deepcopy(doc)
    typo["rollout"]["margin"] = typo["rollout"].pop("margin_s")
    with pytest.raises(ValueError) as e:
        settings.parse_policy(typo, path)
    assert str(e.value).startswith(f"{path}: rollout.margin") and "\n" not in str(e.value)
    wrong = copy.deepcopy(doc)
    wrong["weights_job"]["active_deadline_s"] = "six hours"
    with pytest.raises(ValueError, match=r"weights_job\.active_deadline_s"):
        settings.parse_policy(wrong, path)


def test_moved_constants_are_read_from_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The constants that were inline (rollout margin, copy-Job deadline, HOME cap, probe timeouts)
    come from serving.yaml: changing the file changes the output."""
    from infra.config import settings
    from infra.kubernetes import serving, weights
    from infra.kubernetes.serving_context import serving_context

    stack, plan = _two_checkpoints()
    pool = plan.pools[0]
    p = settings.policy()
    before = serving.rollout_timeout_s(pool, 120.0)
    assert before == serving.rollout_budget_s(pool, 120.0) + p.rollout.margin_s
    changed = p.model_copy(update={
        "rollout": p.rollout.model_copy(update={"margin_s": p.rollout.margin_s + 60}),
        "weights_job": p.weights_job.model_copy(update={"active_deadline_s": 3600}),
        "home": p.home.model_copy(update={"size_limit": "7Gi"}),
        "startup": p.startup.model_copy(update={"timeout_s": 9})})
    monkeypatch.setattr(settings, "policy", lambda: changed)
    assert serving.rollout_timeout_s(pool, 120.0) == before + 60
    job = weights.copy_job("ns", pool.vllm.model, weights.WeightsLocation("b", "p/"), "us-east-1", pool,
                           with_hf_token=False)
    assert job["spec"]["activeDeadlineSeconds"] == 3600
    ctx = serving_context(pool, "ns", "vllm", "us-east-1", weights.WeightsLocation("b", "p/"), False)
    pod = serving.workload(pool, ctx)["spec"]["template"]["spec"]
    assert {"name": "home", "emptyDir": {"sizeLimit": "7Gi"}} in pod["volumes"]
    assert pod["containers"][0]["startupProbe"]["timeoutSeconds"] == 9


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_smoke_job_waits_for_every_pool_and_the_router(case: str) -> None:
    """Issue 32: the awaited smoke Job is created after every pool's workload (LeaderWorkerSets included,
    which Pulumi does not await: the Job's own retries wait for them) and the router's Deployment and Service."""
    _, regs, _ = _registered(case)
    _, plan = CASES[case]()
    by_mock = {r.mock_urn: r for r in regs}
    job = next(r for r in regs if r.name == "job-llmcap-smoke")
    deps = {by_mock[d].name for d in job.dependencies}
    workloads = {r.name for r in regs if r.name.startswith(("deployment-vllm-", "leaderworkerset-vllm-"))}
    assert len(workloads) == len(plan.pools)
    assert workloads | {"deployment-llmcap-router", "service-llmcap-router", "secret-vllm-api-key",
                        "networkpolicy-smoke-job"} <= deps
    router = next(r for r in regs if r.name == "deployment-llmcap-router")
    assert workloads <= {by_mock[d].name for d in router.dependencies}
