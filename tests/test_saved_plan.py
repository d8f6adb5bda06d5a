"""Saved plans (issue 14 item 7): `llmcap plan STACK --write` saves the reviewed plan beside the stack
file; the Pulumi program and `llmcap render` deploy it and never re-plan; a stack file that no longer
matches it stops them with one line. The bundled stacks' saved plans are committed and current."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.catalog.lookup import Catalog
from sizing.catalog.paths import BUNDLED_DIR
from sizing.planning.saved_plan import (
    SavedPlan,
    StalePlanError,
    check_current,
    saved_plan_path,
    spec_fingerprint,
)
from sizing.stack import load_stack
from tests import pulumi_harness as h
from tests.isolation import no_local_data

ROOT = Path(__file__).resolve().parents[1]
STACKS = ROOT / "stacks"
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
REGENERATE = "bash scripts/write_plans.sh"


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    from sizing.cli import app

    r = CliRunner().invoke(app, list(args), env={**ENV, **(env or {})})
    return r.exit_code, r.output


def saved(path: Path) -> SavedPlan:
    return SavedPlan.model_validate_json(path.read_text())


@pytest.fixture
def stacks_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the project's stacks/ folder, cwd at its parent, bundled catalog, no overlay."""
    shutil.copytree(STACKS, tmp_path / "stacks")
    monkeypatch.chdir(tmp_path)
    no_local_data(monkeypatch, tmp_path)
    return tmp_path / "stacks"


# --- every bundled stack has a current saved plan ------------------------------------------------

@pytest.mark.parametrize("name", h.BUNDLED_STACKS)
def test_each_bundled_stack_has_a_current_saved_plan(name: str) -> None:
    stack_file = STACKS / f"Pulumi.{name}.yaml"
    plan_file = saved_plan_path(stack_file)
    assert plan_file.is_file(), f"{plan_file.name} missing: run {REGENERATE}"
    s = saved(plan_file)
    stack = load_stack(stack_file)
    assert s.fingerprint == spec_fingerprint(stack), f"{plan_file.name} is stale: run {REGENERATE}"
    assert s.stack == s.plan.stack == name
    # written from the bundled data only, so it is the same on every machine
    assert {f.source for f in s.generation.catalog} == {"bundled"} and s.generation.overlay is None, \
        f"{plan_file.name} was written with a local catalog or overlay: run {REGENERATE}"


@pytest.mark.parametrize("name", h.BUNDLED_STACKS)
def test_each_bundled_saved_plan_is_what_the_planner_gives_today(name: str, monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    """Not required for deploying (the saved plan is the reviewed artifact), but a saved plan that
    the code no longer reproduces means someone changed the planner without regenerating."""
    from sizing.planning.planner import plan_stack

    no_local_data(monkeypatch, tmp_path)
    stack = load_stack(STACKS / f"Pulumi.{name}.yaml")
    fresh = plan_stack(stack, Catalog(), None, goodput_scale=None)
    s = saved(saved_plan_path(STACKS / f"Pulumi.{name}.yaml"))
    assert json.loads(s.plan.to_json()) == json.loads(fresh.to_json()), \
        f"stacks/Pulumi.{name}.plan.json differs from today's plan: run {REGENERATE} and review the diff"


def test_the_plan_file_name_is_never_a_pulumi_stack_config() -> None:
    # Pulumi's stack config is Pulumi.<stack> + the project file's extension (.yaml) in stackConfigDir
    for p in STACKS.glob("*.plan.json"):
        assert not p.name.endswith((".yaml", ".yml"))
    assert saved_plan_path(Path("stacks/Pulumi.dev.yaml")) == Path("stacks/Pulumi.dev.plan.json")


# --- the fingerprint -----------------------------------------------------------------------------

def test_fingerprint_ignores_comments_and_explicit_defaults_but_not_the_spec(tmp_path: Path) -> None:
    src = (STACKS / "Pulumi.dev.yaml").read_text()
    base = spec_fingerprint(load_stack(STACKS / "Pulumi.dev.yaml"))
    f = tmp_path / "Pulumi.dev.yaml"
    f.write_text("# a comment\n" + src.replace("redundancy: 1", "redundancy: 1   # spare"))
    assert spec_fingerprint(load_stack(f)) == base
    deployment = "  llmcap:deployment:\n"
    assert deployment in src
    f.write_text(src.replace(deployment, deployment + "    weights_bucket_force_destroy: false\n"))  # the default
    assert spec_fingerprint(load_stack(f)) == base
    for old, new in (("concurrent_users: 100", "concurrent_users: 101"), ("us-east-1", "us-west-2"),
                     ("redundancy: 1", "redundancy: 2")):
        f.write_text(src.replace(old, new))
        assert spec_fingerprint(load_stack(f)) != base, new
    f.write_text(src.replace(deployment, deployment + "    nat_gateways: 1\n"))
    assert spec_fingerprint(load_stack(f)) != base


def test_check_current_names_the_stack_file_and_the_fix(tmp_path: Path) -> None:
    s = saved(STACKS / "Pulumi.dev.plan.json")
    f = tmp_path / "Pulumi.dev.yaml"
    f.write_text((STACKS / "Pulumi.dev.yaml").read_text().replace("concurrent_users: 100", "concurrent_users: 200"))
    with pytest.raises(StalePlanError) as e:
        check_current(s, load_stack(f), "stacks/Pulumi.dev.yaml")
    assert e.value.problems == ["stacks/Pulumi.dev.yaml changed since its saved plan: run llmcap plan "
                                "stacks/Pulumi.dev.yaml --write and review the diff"]


# --- llmcap plan --write -------------------------------------------------------------------------

def test_plan_write_saves_beside_the_stack_file(stacks_copy: Path) -> None:
    plan_file = stacks_copy / "Pulumi.dev.plan.json"
    plan_file.unlink()
    code, out = cli("plan", "stacks/Pulumi.dev.yaml", "--write", "--format", "json")
    assert code == 0, out
    assert "wrote stacks/Pulumi.dev.plan.json (bundled catalog)" in out
    s = saved(plan_file)
    assert s.stack_file == "stacks/Pulumi.dev.yaml" and s.fingerprint == spec_fingerprint(
        load_stack(stacks_copy / "Pulumi.dev.yaml"))
    # the pinned rows: every AZ offering of the region, and the spec of each planned instance type
    types = {p.instance_type for p in s.plan.pools}
    assert {r["instance_type"] for r in s.pinned.instances} == types
    assert all(s.pinned.offerings[t] for t in types)
    # deterministic: the committed file is what --write writes on this machine
    assert plan_file.read_text() == (STACKS / "Pulumi.dev.plan.json").read_text()


def test_plan_write_refuses_overrides_that_are_not_in_the_stack_file(stacks_copy: Path) -> None:
    before = (stacks_copy / "Pulumi.dev.plan.json").read_text()
    for extra in (["--set", "workload.traffic.concurrent_users=5"], ["--strategy", "scale-up"]):
        code, out = cli("plan", "stacks/Pulumi.dev.yaml", "--write", *extra)
        assert code == 2 and out.count("\n") == 1 and "--write saves the plan of stacks/Pulumi.dev.yaml" in out
    assert (stacks_copy / "Pulumi.dev.plan.json").read_text() == before


def test_plan_write_records_a_local_catalog_and_overlay(stacks_copy: Path, tmp_path: Path) -> None:
    from sizing.perf.overlay import Overlay, OverlayEntry

    s = saved(stacks_copy / "Pulumi.dev.plan.json")
    pool = s.plan.pools[0]
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "prices.csv").write_text((BUNDLED_DIR / "prices.csv").read_text())
    ov = Overlay(entries=[OverlayEntry(gpu=pool.gpu, engine="vllm", model=pool.vllm.model, goodput_scale=0.5,
                                       measured_goodput_output_tokens_per_s_per_replica=500,
                                       predicted_goodput_output_tokens_per_s_per_replica=1000)])
    ov.save(tmp_path / "overlay.json")
    code, out = cli("plan", "stacks/Pulumi.dev.yaml", "--write", "--catalog", str(cache),
                    env={"LLMCAP_CALIBRATION_OVERLAY": str(tmp_path / "overlay.json")})
    assert code == 0, out
    s2 = saved(stacks_copy / "Pulumi.dev.plan.json")
    sources = {f.name: f.source for f in s2.generation.catalog}
    assert sources["prices.csv"] == str(cache / "prices.csv") and sources["gpus.csv"] == "bundled"
    if s2.generation.overlay_notes:  # the overlay applies when its (gpu, model) is a candidate of the plan
        assert s2.generation.overlay is not None and s2.generation.overlay.source.endswith("overlay.json")


def test_a_saved_plan_file_is_accepted_wherever_a_plan_json_is(tmp_path: Path) -> None:
    from sizing.planning.saved_plan import load_plan_file

    plan_file = STACKS / "Pulumi.dev.plan.json"
    assert load_plan_file(plan_file) == saved(plan_file).plan
    code, out = cli("diff", "--from", str(plan_file), "--to", str(STACKS / "Pulumi.prod.plan.json"), "--format",
                    "json")
    assert code == 0, out
    d = json.loads(out)
    assert d["source"] == "saved-plans" and d["stacks"][0]["stack"] == "prod"


def test_the_pinned_catalog_answers_from_the_saved_plan_not_from_this_machine(tmp_path: Path) -> None:
    from dataclasses import asdict

    from sizing.planning.pinned_catalog import PinnedCatalog

    s = saved(STACKS / "Pulumi.llama70b.plan.json")
    s.pinned.offerings = {t: ["use1-az9"] for t in s.pinned.offerings}  # as if the AWS answer had been different
    s.pinned.instances[0]["memory_gib"] = 123.0
    s.pinned.models[0]["num_layers"] = 7
    cat = PinnedCatalog(s.pinned)
    t = s.pinned.instances[0]["instance_type"]
    assert cat.offered_azs(t, s.plan.region) == ("use1-az9",)
    assert cat.instance(t).memory_gib == 123.0 and cat.model(s.plan.model).num_layers == 7
    assert asdict(cat.model(s.plan.model))["sliding_window_layers"] == ()  # tuples come back as tuples
    assert cat.price(t, s.plan.region, "on-demand") == Catalog().price(t, s.plan.region, "on-demand")  # bundled
