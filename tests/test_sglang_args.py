"""SGLang pools: the plan → `python -m sglang.launch_server` mapping, parsed by a parser rebuilt from the pinned
release's own argparse definitions (infra/data/sglang_flags.yaml, extracted from the sglang wheel by
scripts/build_sglang_flags.py: the wheel's parser needs torch and friends, so it cannot run here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infra.config import settings
from infra.kubernetes import serving
from infra.kubernetes.k8s_common import API_KEY_SECRET, API_KEY_SECRET_KEY, secret_env
from infra.kubernetes.serving_context import serving_context
from infra.kubernetes.sglang_args import SglangArgsError, check_args, engine_flags, parser, serve_args
from infra.kubernetes.vllm_args import ModelSource, MultiNode
from infra.kubernetes.weights import WeightsLocation
from sizing.planning.planner import plan_for
from tests.k8s_support import STACK_FILES, flag_values
from tests.plan_factory import make_pool
from tests.pulumi_harness import pins

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "stacks" / "Pulumi.dev.yaml"
SGLANG = ["workload.engine=sglang"]


def _sglang(pool):  # type: ignore[no-untyped-def]
    return pool.model_copy(update={"engine": "sglang"})


def _ctx(pool):  # type: ignore[no-untyped-def]
    return serving_context(pool, "llmcap", "vllm", "us-east-1", WeightsLocation("bkt", "models/x/"), True)


def test_a_stack_with_engine_sglang_renders_an_sglang_server() -> None:
    # the defect: the plan used SGLang's performance model while the pods ran `vllm serve`
    plan = plan_for(DEV, SGLANG)
    pool = plan.pools[0]
    assert pool.engine == "sglang"
    c = serving.workload(pool, _ctx(pool))["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["python3", "-m", "sglang.launch_server"]
    assert "lmsysorg/sglang:" in c["image"]
    flags = flag_values(c["args"])
    assert flags["--tp"] == str(pool.tensor_parallel)
    assert flags["--mem-fraction-static"] == f"{pool.vllm.gpu_memory_utilization:g}"
    assert flags["--max-running-requests"] == str(pool.vllm.max_num_seqs)
    assert flags["--chunked-prefill-size"] == str(pool.vllm.max_num_batched_tokens)
    assert "--enable-metrics" in flags and flags["--api-key"] == "$(SGLANG_API_KEY)"
    assert secret_env("SGLANG_API_KEY", API_KEY_SECRET, API_KEY_SECRET_KEY) in c["env"]
    assert c["startupProbe"]["httpGet"]["path"] == "/health"


def test_the_flags_file_is_the_pinned_image_release() -> None:
    allow = settings.sglang_flags()
    assert allow["sglang_version"] == settings.image("sglang").tag == settings.sglang_values()["sglang_version"]
    assert allow["source"] and allow["as_of"]
    for flag in ("--tp-size", "--dp-size", "--mem-fraction-static", "--chunked-prefill-size", "--max-running-requests",
                 "--schedule-policy", "--enable-metrics", "--api-key", "--served-model-name", "--nnodes",
                 "--node-rank", "--dist-init-addr"):
        assert flag in allow["flags"], flag


def test_every_plan_field_maps_to_its_flag() -> None:
    v = make_pool(tp=2, pp=1, precision="fp8").vllm.model_copy(update={"kv_cache_dtype": "fp8"})
    flags = flag_values(engine_flags(v))
    assert flags["--tp"] == "2" and flags["--kv-cache-dtype"] == "fp8_e4m3" and flags["--schedule-policy"] == "fcfs"
    off = v.model_copy(update={"enable_prefix_caching": False, "quantization": None, "schedule_policy": "lpm"})
    out = engine_flags(off)
    assert "--disable-radix-cache" in out and "--quantization" not in out and "lpm" in out


def test_online_fp8_takes_sglangs_own_name() -> None:
    """vLLM 0.33.0 calls online FP8 `fp8_per_tensor` (the plan's name); SGLang 0.5.23 accepts only `fp8` for it,
    so an FP8 SGLang pool must not inherit vLLM's name (infra/data/sglang_values.yaml quantization)."""
    v = make_pool(precision="fp8").vllm.model_copy(update={"quantization": "fp8_per_tensor"})
    out = engine_flags(v)
    assert flag_values(out)["--quantization"] == "fp8"
    check_args(out)
    kept = v.model_copy(update={"quantization": "awq_marlin"})
    assert flag_values(engine_flags(kept))["--quantization"] == "awq_marlin"


def test_the_rebuilt_parser_resolves_as_the_release_does() -> None:
    ns = parser().parse_args(["--model-path", "m", "--tp", "4", "--mem-fraction-static", "0.88", "--enable-metrics"])
    assert (ns.tp_size, ns.mem_fraction_static, ns.enable_metrics) == (4, 0.88, True)
    with pytest.raises(SglangArgsError, match="--enable-magic"):
        check_args(["--model-path", "m", "--enable-magic"])
    with pytest.raises(SglangArgsError, match="schedule-policy"):
        check_args(["--schedule-policy", "shortest-job"])
    with pytest.raises(SglangArgsError, match="mem-fraction-static"):
        check_args(["--mem-fraction-static", "most"])
    with pytest.raises(SglangArgsError):  # --en is the prefix of many flags: argparse refuses it as SGLang does
        check_args(["--en"])


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_every_sglang_command_for_a_bundled_stack_parses(path: Path) -> None:
    for pool in plan_for(path, SGLANG).pools:
        assert pool.engine == "sglang"
        for mn in (None, MultiNode(2, "0", "$(LWS_LEADER_ADDRESS)", headless=False),
                   MultiNode(2, "$(LWS_WORKER_INDEX)", "$(LWS_LEADER_ADDRESS)", headless=True)):
            args = serve_args(pool, ModelSource("s3://b/m/", "runai_streamer"), 8000, mn)
            check_args(args)


def test_a_multi_node_sglang_replica_is_a_leader_worker_set() -> None:
    pool = _sglang(make_pool(tp=8, pp=2)).model_copy(update={"nodes_per_replica": 2})
    lws = serving.workload(pool, _ctx(pool))
    assert lws["kind"] == "LeaderWorkerSet"
    t = lws["spec"]["leaderWorkerTemplate"]
    leader = flag_values(t["leaderTemplate"]["spec"]["containers"][0]["args"])
    worker = flag_values(t["workerTemplate"]["spec"]["containers"][0]["args"])
    assert (leader["--nnodes"], leader["--node-rank"], worker["--node-rank"]) == ("2", "0", "$(LWS_WORKER_INDEX)")
    assert leader["--dist-init-addr"] == worker["--dist-init-addr"] == "$(LWS_LEADER_ADDRESS):25000"
    assert leader["--pp-size"] == "2"


def test_the_engine_takes_one_or_a_list_listed_once() -> None:
    from pydantic import ValidationError

    from sizing.spec import WorkloadSpec

    base = {"model": "m", "prompt_tokens": 10, "output_tokens": 10, "traffic": {"concurrent_users": 1}}
    assert WorkloadSpec.model_validate({**base, "engine": ["vllm", "sglang"]}).engines == ["vllm", "sglang"]
    assert WorkloadSpec.model_validate(base).engines == ["vllm"]
    for bad in ([], ["sglang", "sglang"], ["vllm", "tgi"]):
        with pytest.raises(ValidationError):
            WorkloadSpec.model_validate({**base, "engine": bad})


def test_a_list_of_engines_plans_each_and_shows_the_best_of_each() -> None:
    plan = plan_for(ROOT / "stacks" / "Pulumi.engines.yaml")
    assert [e.engine for e in plan.engines] == ["vllm", "sglang"]
    chosen = [e for e in plan.engines if e.chosen]
    assert len(chosen) == 1 and {p.engine for p in plan.pools} == {chosen[0].engine}
    assert all(e.feasible and e.usd_per_month and e.why for e in plan.engines)
    assert min(e.all_in_usd_per_month or 0 for e in plan.engines) == chosen[0].all_in_usd_per_month
    assert plan.workload.engines == ["vllm", "sglang"]  # the stack as written: the saved plan's fingerprint


def test_the_dashboard_queries_the_series_sglang_exports() -> None:
    from infra.kubernetes.observability import dashboard

    d = dashboard(plan_for(DEV, SGLANG), "llmcap")
    exprs = " ".join(t["expr"] for p in d["panels"] for t in p["targets"])
    for series in ("sglang:time_to_first_token_seconds_bucket", "sglang:inter_token_latency_seconds_bucket",
                   "sglang:num_queue_reqs", "sglang:num_running_reqs", "sglang:token_usage",
                   "sglang:generation_tokens_total"):
        assert series in exprs, series
    assert "vllm:" not in exprs and "SGLang" in d["title"]


def test_a_sweep_of_a_stack_with_several_engines_is_refused_in_one_line() -> None:
    from typer.testing import CliRunner

    from sizing.cli import app

    r = CliRunner().invoke(app, ["compare", str(ROOT / "stacks" / "Pulumi.engines.yaml"), str(DEV),
                                 "--sweep", "users=1..200:100"])
    assert r.exit_code == 2 and "a sweep prices one engine" in r.output and "Traceback" not in r.output


def test_the_compose_file_runs_the_same_flags_and_requires_the_key() -> None:
    from infra.compose import build, interpolation_errors

    plan = plan_for(DEV, SGLANG)
    pool = plan.pools[0]
    files = build(plan, pins())
    svc = files.compose["services"]["sglang"]
    assert "lmsysorg/sglang:" in svc["image"]
    assert svc["entrypoint"][:2] == ["/bin/sh", "-c"] and "sglang.launch_server" in svc["entrypoint"][2]
    assert '--api-key "$$SGLANG_API_KEY"' in svc["entrypoint"][2]  # from the container env, not the file
    eks = serving.workload(pool, _ctx(pool))["spec"]["template"]["spec"]["containers"][0]["args"]
    same = {k: v for k, v in flag_values(eks).items() if k not in ("--model-path", "--api-key")}
    assert {k: v for k, v in flag_values(svc["command"]).items() if k != "--model-path"} == same
    check_args(svc["command"])
    assert interpolation_errors(files.compose, {}) and not interpolation_errors(files.compose, {"SGLANG_API_KEY": "k"})
    assert "SGLANG_API_KEY=" in files.env_example
    assert files.compose["services"]["prometheus"]["depends_on"] == ["sglang"]


def test_an_empty_api_key_is_refused_for_an_sglang_stack_too() -> None:
    from infra.fit.check import FitContext, check_deployable
    from sizing.catalog.lookup import load_catalog
    from sizing.stack import load_stack

    stack = load_stack(ROOT / "stacks" / "Pulumi.sglang.yaml")
    report = check_deployable(FitContext(stack=stack, plan=plan_for(ROOT / "stacks" / "Pulumi.sglang.yaml"),
                                         catalog=load_catalog(), api_key=" "))
    lines = [p for p in report.problems if p.rule == "api-key-empty"]
    assert lines and "SGLang serves every route unauthenticated" in lines[0].message


@pytest.mark.skipif(not os.environ.get("LLMCAP_SGLANG_WHEEL_DIR"),
                    reason="set LLMCAP_SGLANG_WHEEL_DIR to an unpacked sglang wheel of the pinned version (and "
                           "PYTHONPATH to a folder holding msgspec) to check the flags file against it")
def test_the_flags_file_is_what_the_pinned_wheel_declares(tmp_path: Path) -> None:
    import subprocess
    import sys

    import yaml

    pinned = settings.sglang_flags()
    out = tmp_path / "flags.yaml"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "build_sglang_flags.py"),
                    os.environ["LLMCAP_SGLANG_WHEEL_DIR"], "--version", pinned["sglang_version"].lstrip("v"),
                    "--as-of", pinned["as_of"], "--out", str(out)], check=True, capture_output=True, text=True)
    assert yaml.safe_load(out.read_text(encoding="utf-8")) == pinned


def test_the_copy_job_downloads_with_the_pools_own_image() -> None:
    # one engine image per node: the copy Job runs on a node of the pool it serves (infra/kubernetes/weights.py)
    from infra.kubernetes.weights import copy_job

    pool = plan_for(DEV, SGLANG).pools[0]
    job = copy_job("llmcap", pool.vllm.model, WeightsLocation("b", "p/"), "us-east-1", pool, False)
    download = job["spec"]["template"]["spec"]["initContainers"][0]
    assert "lmsysorg/sglang:" in download["image"] and download["command"][0] == "hf"


def test_the_image_pins_name_only_the_images_a_plan_pulls() -> None:
    from infra.config.registry import CLUSTER_IMAGES
    from infra.kubernetes.engines import images_in_use

    assert "sglang" in images_in_use(plan_for(DEV, SGLANG), CLUSTER_IMAGES)
    assert "vllm" not in images_in_use(plan_for(DEV, SGLANG), CLUSTER_IMAGES)
    assert images_in_use(plan_for(DEV), CLUSTER_IMAGES) == ["vllm", "router", "aws_cli"]
