"""The single-server target: docker-compose.yml validates against the Compose Specification schema
(and `docker compose config` where a Compose CLI exists), with the plan's vLLM flags."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from infra.compose import ComposeTargetError, build, write_compose
from infra.kubernetes.vllm_args import ModelSource, serve_args
from tests.plan_factory import make_plan, make_pool
from tests.pulumi_harness import pins

SCHEMA = json.loads((Path(__file__).parent / "data" / "compose_spec.json").read_text())
# the 2021 file names its draft with a non-standard URI; its keywords are draft-07
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


def _has_compose_cli() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0


def test_compose_file_validates_and_carries_the_plan_flags(tmp_path: Path) -> None:
    pool = make_pool(tp=2, replicas_per_instance=2, gpus_per_instance=4)
    written = write_compose(make_plan([pool]), tmp_path, pins())
    assert {p.name for p in written} == {"docker-compose.yml", "prometheus.yml", ".env.example"}
    doc = yaml.safe_load((tmp_path / "docker-compose.yml").read_text())
    VALIDATOR.validate(doc)
    vllm = doc["services"]["vllm"]
    assert vllm["image"].startswith("vllm/vllm-openai:v")
    assert vllm["ipc"] == "host"
    assert vllm["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    expected = serve_args(pool, ModelSource(pool.vllm.model), 8000)
    assert vllm["command"][: len(expected)] == expected
    assert vllm["command"][len(expected):] == ["--data-parallel-size", "2"]
    assert vllm["env_file"] == [".env"] and "VLLM_API_KEY=" in (tmp_path / ".env.example").read_text()
    assert "--api-key" not in vllm["command"]
    prom = yaml.safe_load((tmp_path / "prometheus.yml").read_text())
    assert prom["scrape_configs"][0]["static_configs"][0]["targets"] == ["vllm:8000"]
    assert doc["services"]["prometheus"]["ports"] == ["127.0.0.1:9090:9090"]


def test_schema_rejects_what_compose_would_reject() -> None:
    doc = build(make_plan(), pins()).compose
    bad = {**doc, "services": {"vllm": {**doc["services"]["vllm"], "ipcc": "host"}}}
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(bad)


def test_multi_node_plan_cannot_target_one_server() -> None:
    pool = make_pool(tp=8, pp=2, gpus_per_instance=8, nodes_per_replica=2, replicas_per_instance=1,
                     instances_max=4, replicas=2)
    with pytest.raises(ComposeTargetError, match="spans 2 nodes"):
        build(make_plan([pool]), pins())


@pytest.mark.skipif(not _has_compose_cli(), reason="no Docker Compose CLI on this machine; the schema test covers it")
def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    write_compose(make_plan(), tmp_path, pins())
    (tmp_path / ".env").write_text("VLLM_API_KEY=test\nHF_TOKEN=\n")
    r = subprocess.run(["docker", "compose", "-f", str(tmp_path / "docker-compose.yml"), "config", "--quiet"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# --- hardening (issue 18 item 13) ------------------------------------------------------------------

def test_compose_refuses_to_start_without_a_key_binds_to_localhost_and_runs_vllm_as_non_root() -> None:
    from infra.compose import BIND_ADDRESS_VAR, RUN_AS

    doc = build(make_plan(), pins()).compose
    VALIDATOR.validate(doc)
    vllm = doc["services"]["vllm"]
    # `${VAR:?message}` makes `docker compose up` fail when the variable is unset OR empty (an empty
    # VLLM_API_KEY turns vLLM's auth off)
    key = vllm["environment"]["VLLM_API_KEY"]
    assert key.startswith("${VLLM_API_KEY:?") and key.endswith("}"), key
    assert vllm["ports"] == [f"${{{BIND_ADDRESS_VAR}:-127.0.0.1}}:8000:8000"]
    assert vllm["user"] == RUN_AS and not RUN_AS.startswith("0")
    assert "no-new-privileges:true" in vllm["security_opt"]
    # the cache volume is handed to that user before vLLM starts (a new named volume is root's)
    init = doc["services"]["volume-init"]
    assert vllm["depends_on"]["volume-init"] == {"condition": "service_completed_successfully"}
    assert init["user"] == "0:0" and init["command"][:2] == ["chown", "-R"] and RUN_AS in init["command"]
    assert {v.split(":")[1] for v in vllm["volumes"]} == {v.split(":")[1] for v in init["volumes"]}
    env = vllm["environment"]
    assert env["HF_HOME"].startswith(env["HOME"].rsplit("/", 1)[0])  # caches on the writable volume
    assert env["USER"]  # torch's cache dirs call getpass.getuser(), which needs USER for a UID without passwd


def test_compose_interpolation_rejects_an_empty_key() -> None:
    """What Compose does with `${VLLM_API_KEY:?...}`: the same rule, on an empty and an unset value."""
    from infra.compose import interpolation_errors

    doc = build(make_plan(), pins()).compose
    assert interpolation_errors(doc, {"VLLM_API_KEY": "k"}) == []
    for env in ({}, {"VLLM_API_KEY": ""}):
        errors = interpolation_errors(doc, env)
        assert errors and "VLLM_API_KEY" in errors[0], env
