"""The deployability check refuses a broken stack before anything is written, with one line per
problem naming the rule (`llmcap render`), and passes the six bundled stacks. Rules the planner
cannot be talked into breaking with `--set` are broken through a catalog override (`--catalog DIR`,
as `llmcap catalog refresh` writes one) or a hand-built plan."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infra.fit.check import FitContext, check_deployable
from sizing.catalog.lookup import load_catalog
from sizing.catalog.paths import BUNDLED_DIR
from sizing.cli import app
from sizing.stack import load_stack
from tests.k8s_support import ROOT, STACK_IDS
from tests.plan_factory import make_plan, make_pool

runner = CliRunner()


def _render(tmp_path: Path, stack: str, *args: str) -> tuple[int, str, Path]:
    out = tmp_path / "out"
    if "--catalog" in args:  # a saved plan pins its catalog rows: plan afresh with the edited catalog
        args = (*args, "--fresh")
    r = runner.invoke(app, ["render", str(ROOT / "stacks" / f"Pulumi.{stack}.yaml"), "--out", str(out), *args],
                      env={"COLUMNS": "250"})
    return r.exit_code, r.output, out


def _catalog(tmp_path: Path, table: str, edit) -> Path:  # type: ignore[no-untyped-def]
    d = tmp_path / "catalog"
    d.mkdir(exist_ok=True)
    with (BUNDLED_DIR / table).open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    fields = list(rows[0])
    rows = [r for r in (edit(dict(r)) for r in rows) if r is not None]
    with (d / table).open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return d


def _refused(code: int, output: str, out: Path, rule: str) -> None:
    assert code == 2, output
    lines = [ln for ln in output.splitlines() if ln.startswith("error: ")]
    named = [ln for ln in lines if f"[{rule}]" in ln]
    assert named, output
    assert "Traceback" not in output
    assert not out.exists() or not any(out.iterdir()), "nothing may be written"


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_bundled_stacks_pass(stack_id: str) -> None:
    stack = load_stack(ROOT / "stacks" / f"Pulumi.{stack_id}.yaml")
    from sizing.planning.planner import plan_stack

    cat = load_catalog()
    report = check_deployable(FitContext(stack=stack, plan=plan_stack(stack, cat), catalog=cat, api_key="k"))
    assert report.ok, report.lines()
    assert len(report.rows) == len(report.rows) and all("CPU req/alloc (m)" in r for r in report.rows)


def test_render_prints_the_fit_table(tmp_path: Path) -> None:
    code, output, out = _render(tmp_path, "llama405b")
    assert code == 0, output
    assert "deployability check" in output and "p5-48xlarge" in output and "mem req/alloc" in output
    assert (out / "resources.json").exists()


def test_empty_api_key_is_refused(tmp_path: Path) -> None:
    _refused(*_render(tmp_path, "dev", "--set", "api_key="), "api-key-empty")


def test_tiny_node_type_is_refused(tmp_path: Path) -> None:
    # g6e.xlarge with 2 vCPUs: the weights-sync init container alone requests 2 CPUs
    def tiny(r: dict) -> dict:
        if r["instance_type"] == "g6e.xlarge":
            r["vcpus"] = "2"
        return r
    cat = _catalog(tmp_path, "instances.csv", tiny)
    _refused(*_render(tmp_path, "dev", "--catalog", str(cat)), "requests-exceed-allocatable")


def test_instance_store_too_small_for_the_copy_is_refused(tmp_path: Path) -> None:
    def small(r: dict) -> dict:
        if r["instance_type"] == "g6e.xlarge":
            r["local_nvme_gb"] = "12"
        return r
    cat = _catalog(tmp_path, "instances.csv", small)
    _refused(*_render(tmp_path, "dev", "--catalog", str(cat)), "storage-below-checkpoint")


def test_region_with_only_disallowed_cluster_azs_is_refused(tmp_path: Path) -> None:
    # us-east-1 offers g6e.xlarge only in use1-az3 (EKS disallows cluster subnets there) and use1-az1
    def only(r: dict) -> dict | None:
        if r["region"] != "us-east-1":
            return r
        return r if r["availability_zone_id"] in ("use1-az3", "use1-az1") else None
    cat = _catalog(tmp_path, "offerings.csv", only)
    shutil.copy(BUNDLED_DIR / "instances.csv", cat / "instances.csv")
    _refused(*_render(tmp_path, "dev", "--catalog", str(cat)), "cluster-subnet-disallowed-az")


def test_no_room_for_the_surge_replica_is_refused(tmp_path: Path) -> None:
    _refused(*_render(tmp_path, "dev", "--set", "hardware.autoscaling_headroom=0"), "node-group-max-below-surge")


# --- rules the planner never breaks, on hand-built plans --------------------------------------------

def _check(plan):  # type: ignore[no-untyped-def]
    stack = load_stack(ROOT / "stacks" / "Pulumi.scaleout-l4.yaml")
    return {p.rule for p in check_deployable(FitContext(stack=stack, plan=plan, catalog=load_catalog(),
                                                        api_key="k")).problems}


def _pool(**kw):  # type: ignore[no-untyped-def]
    from sizing.planning.allocatable import per_replica_requests

    base = dict(replicas=4, replicas_per_instance=2, instances_min=2, instances_desired=2, instances_max=3, tp=2,
                precision="fp16")
    base.update(kw)
    pool = make_pool(**base)
    cat = load_catalog()
    cpu, mem = per_replica_requests(cat, cat.instances[pool.instance_type], pool.replicas_per_instance)
    return pool.model_copy(update={"cpu_millicores_per_replica": cpu, "memory_mib_per_replica": mem,
                                   "checkpoint_gib": 16.0, "model_cache_gib_per_node": 18.0, "root_volume_gib": 64})


def test_a_consistent_hand_built_plan_passes() -> None:
    assert _check(make_plan([_pool()], stack="scaleout-l4")) == set()


def test_more_gpus_than_the_node_has() -> None:
    assert "gpus-exceed-node" in _check(make_plan([_pool(tp=4, replicas_per_instance=2)], stack="scaleout-l4"))


def test_quantized_precision_serving_the_base_model() -> None:
    p = _pool(precision="int4-awq")
    p = p.model_copy(update={"vllm": p.vllm.model_copy(update={"quantization": "awq_marlin"})})
    assert "served-model-mismatch" in _check(make_plan([p], stack="scaleout-l4"))


def test_pdb_above_what_the_node_group_can_run() -> None:
    p = _pool(replicas=8, replicas_per_instance=2, instances_min=2, instances_desired=2, instances_max=2)
    assert "pdb-exceeds-runnable" in _check(make_plan([p], stack="scaleout-l4"))


def test_model_cache_smaller_than_the_checkpoint() -> None:
    p = _pool().model_copy(update={"checkpoint_gib": 40.0, "model_cache_gib_per_node": 20.0})
    assert "storage-below-checkpoint" in _check(make_plan([p], stack="scaleout-l4"))


def test_max_num_seqs_below_planned_concurrency() -> None:
    p = _pool()
    p = p.model_copy(update={"per_replica": p.per_replica.model_copy(update={"planned_concurrency": 80.0})})
    assert "max-num-seqs-below-concurrency" in _check(make_plan([p], stack="scaleout-l4"))


def test_batched_tokens_below_max_num_seqs_is_refused() -> None:
    """vLLM 0.33.0 (vllm/config/scheduler.py verify_max_model_len) raises when max_num_batched_tokens <
    max_num_seqs: the pod would crash-loop on start."""
    p = _pool()
    p = p.model_copy(update={"vllm": p.vllm.model_copy(update={"max_num_seqs": 600, "max_num_batched_tokens": 512})})
    assert "vllm-flags-rejected" in _check(make_plan([p], stack="scaleout-l4"))


def test_bundled_plans_pass_vllms_own_flag_checks() -> None:
    for f in sorted((ROOT / "stacks").glob("Pulumi.*.plan.json")):
        plan = json.loads(f.read_text())["plan"]
        for pool in plan["pools"]:
            v = pool["vllm"]
            assert v["max_num_batched_tokens"] >= v["max_num_seqs"], (f.name, pool["name"])


def test_capacity_below_demand() -> None:
    plan = make_plan([_pool()], stack="scaleout-l4")
    plan = plan.model_copy(update={"totals": plan.totals.model_copy(update={"capacity_output_tokens_per_s": 100.0})})
    assert "capacity-below-demand" in _check(plan)


def test_lws_exclusive_topology_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    import infra.fit.rules as fr

    real = fr.workload

    def exclusive(pool, ctx):  # type: ignore[no-untyped-def]
        w = real(pool, ctx)
        w["metadata"]["annotations"] = {"leaderworkerset.sigs.k8s.io/exclusive-topology": "topology.kubernetes.io/zone"}
        return w
    monkeypatch.setattr(fr, "workload", exclusive)
    assert "lws-exclusive-topology" in _check(make_plan([_pool()], stack="scaleout-l4"))


def test_a_gated_checkpoint_without_a_token_is_refused(tmp_path: Path) -> None:
    """Issue 32: Meta's Llama repositories are gated (sizing/data/checkpoints.csv `gated`); without
    llmcap:hf_token the copy Job would fail after every GPU node is up, so render and `pulumi up` refuse it."""
    _refused(*_render(tmp_path, "llama70b", "--set", "hf_token="), "gated-checkpoint-without-token")
    stack = load_stack(ROOT / "stacks" / "Pulumi.llama70b.yaml")
    from sizing.planning.planner import plan_stack

    cat = load_catalog()
    plan = plan_stack(stack, cat)
    assert cat.checkpoints[plan.pools[0].vllm.model].gated is True
    refused = check_deployable(FitContext(stack=stack, plan=plan, catalog=cat, api_key="k",
                                          extra={"hf_token_set": False}))
    assert [p.rule for p in refused.problems] == ["gated-checkpoint-without-token"]
    assert "pulumi config set --secret llmcap:hf_token" in refused.lines()[0]
    assert check_deployable(FitContext(stack=stack, plan=plan, catalog=cat, api_key="k",
                                       extra={"hf_token_set": True})).ok
