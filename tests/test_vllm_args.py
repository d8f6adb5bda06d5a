"""The one plan → vLLM flag mapping, checked against the pinned version's allowlist."""

from __future__ import annotations

import pytest

from infra.config import settings
from infra.kubernetes.vllm_args import ModelSource, MultiNode, VllmArgsError, check_args, engine_flags, serve_args
from tests.k8s_support import STACK_FILES
from tests.plan_factory import make_pool

REQUIRED_MAPPING = ("--tensor-parallel-size", "--pipeline-parallel-size", "--max-model-len", "--max-num-seqs",
                    "--max-num-batched-tokens", "--gpu-memory-utilization", "--quantization", "--kv-cache-dtype",
                    "--enable-prefix-caching", "--served-model-name")


def test_allowlist_names_the_pinned_image_version_and_its_source() -> None:
    allow = settings.vllm_flags()
    assert allow["vllm_version"] == settings.image("vllm").tag
    assert allow["source"] and allow["as_of"]
    for flag in REQUIRED_MAPPING + ("--load-format", "--nnodes", "--node-rank", "--master-addr", "--headless",
                                    "--no-enable-prefix-caching", "--data-parallel-size"):
        assert flag in allow["flags"], flag


def test_every_plan_field_maps_to_its_flag() -> None:
    pool = make_pool(tp=2, pp=1, precision="fp8")
    flags = engine_flags(pool.vllm)
    for flag in REQUIRED_MAPPING:
        assert flag in flags, flag
    off = pool.vllm.model_copy(update={"enable_prefix_caching": False, "quantization": None})
    assert "--no-enable-prefix-caching" in engine_flags(off) and "--quantization" not in engine_flags(off)


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_every_flag_emitted_for_a_bundled_stack_is_allowed(path) -> None:  # type: ignore[no-untyped-def]
    from sizing.planning.planner import plan_for
    allowed = set(settings.vllm_flags()["flags"])
    for pool in plan_for(path).pools:
        args = serve_args(pool, ModelSource("s3://b/m/", "runai_streamer"), 8000,
                          MultiNode(2, "0", "$(LWS_LEADER_ADDRESS)", headless=True))
        emitted = {a for a in args if a.startswith("--")}
        assert emitted <= allowed, sorted(emitted - allowed)


def test_unknown_flag_and_value_are_rejected() -> None:
    with pytest.raises(VllmArgsError, match="--enable-magic"):
        check_args(["--enable-magic"])
    with pytest.raises(VllmArgsError, match="--kv-cache-dtype int3"):
        check_args(["--kv-cache-dtype", "int3"])
    pool = make_pool()
    bad = pool.model_copy(update={"vllm": pool.vllm.model_copy(update={"quantization": "no-such-method"})})
    with pytest.raises(VllmArgsError, match="--quantization no-such-method"):
        serve_args(bad, ModelSource("m"), 8000)


def test_no_value_the_pinned_vllm_deprecates_is_emitted() -> None:
    """Issue 32: `--quantization fp8` on a 16-bit checkpoint is deprecated in vLLM 0.33.0 (rewritten to
    fp8_per_tensor with a warning); the allowlist names such values and check_args refuses them."""
    deprecated = settings.vllm_flags()["deprecated_values"]
    assert deprecated["--quantization"]["fp8"]["use"] == "fp8_per_tensor"
    with pytest.raises(VllmArgsError, match="--quantization fp8: deprecated in vLLM .*fp8_per_tensor"):
        check_args(["--quantization", "fp8"])
    from sizing.planning.planner import plan_for
    for path in STACK_FILES:
        for pool in plan_for(path).pools:
            args = serve_args(pool, ModelSource("s3://b/m/", "runai_streamer"), 8000)
            for i, a in enumerate(args[:-1]):
                assert args[i + 1] not in deprecated.get(a, {}), f"{path.name}: {a} {args[i + 1]}"
