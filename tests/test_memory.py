"""Memory sizing: the source material's figures, and physical invariants."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sizing.catalog.lookup import load_catalog
from sizing.cli import app
from sizing.perf.memory import GIB, kv_cache_bytes_per_sequence, kv_cache_bytes_per_token, memory_fit
from sizing.perf.replica import ReplicaConfig

runner = CliRunner()
CAT = load_catalog()


def test_llama70b_kv_and_weights_from_the_cli() -> None:
    r = runner.invoke(app, ["estimate", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-SXM",
                            "--tp", "4", "--precision", "bf16", "--prompt-tokens", "8192", "--output-tokens", "0",
                            "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["kv_cache_bytes_per_token"] == 2 * 80 * 8 * 128 * 2 == 327680
    assert abs(d["weights_gib"] - 131) < 1.0
    # 8,192 tokens of KV: 2.7 GB (decimal), as in the source material
    assert abs(327680 * 8192 / 1e9 - 2.68) < 0.01
    for k in ("kv_cache_gib_available", "max_concurrent_sequences"):
        assert k in d


def test_quantization_shrinks_weights() -> None:
    m = CAT.model("llama-3-8b-instruct")
    sizes = {p: memory_fit(CAT, ReplicaConfig(m, "L4", p), 1536).weights_gib for p in ("fp16", "fp8", "int4-awq")}
    assert sizes["fp16"] > sizes["fp8"] > sizes["int4-awq"]
    # AWQ keeps embeddings and lm_head in 16 bits: ~5.5-6 GiB, not 8e9 × 0.5 bytes
    assert 5.0 < sizes["int4-awq"] < 6.5


def test_sliding_window_caps_kv() -> None:
    gemma = CAT.model("gemma-2-27b-it")
    full = kv_cache_bytes_per_token(gemma, 2.0) * 16384
    capped = kv_cache_bytes_per_sequence(gemma, 16384, 2.0)
    assert capped < full
    assert kv_cache_bytes_per_sequence(gemma, 1000, 2.0) == kv_cache_bytes_per_token(gemma, 2.0) * 1000


def test_mla_kv_is_latent_sized() -> None:
    ds = CAT.model("deepseek-v3")
    assert kv_cache_bytes_per_token(ds, 2.0) == 61 * (512 + 64) * 2


def test_fp8_kv_halves_cache() -> None:
    m = CAT.model("llama-3.1-8b-instruct")
    a = memory_fit(CAT, ReplicaConfig(m, "L40S", "bf16", kv_cache_dtype="auto"), 4096)
    b = memory_fit(CAT, ReplicaConfig(m, "L40S", "bf16", kv_cache_dtype="fp8"), 4096)
    assert b.kv_cache_bytes_per_token * 2 == a.kv_cache_bytes_per_token
    assert b.max_concurrent_sequences >= 2 * a.max_concurrent_sequences - 1


def test_too_big_does_not_fit() -> None:
    m = CAT.model("llama-3.1-405b-instruct")
    f = memory_fit(CAT, ReplicaConfig(m, "L4", "bf16"), 2048)
    assert not f.fits and "exceed" in f.reason


MODELS = sorted(CAT.models)
GPUS = ["L4", "A10G", "L40S", "A100-80GB", "H100-SXM", "H200"]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(GPUS), st.sampled_from(["bf16", "fp8", "int4-awq"]),
       st.integers(min_value=256, max_value=32768))
def test_more_tp_never_raises_memory_per_gpu(model: str, gpu: str, precision: str, ctx: int) -> None:
    m = CAT.model(model)
    prev_w = prev_total = None
    for tp in (1, 2, 4, 8):
        f = memory_fit(CAT, ReplicaConfig(m, gpu, precision, tp), ctx)
        per_gpu = f.weights_gib_per_gpu + f.overhead_gib_per_gpu
        if prev_w is not None:
            assert f.weights_gib_per_gpu <= prev_w + 1e-9
            assert per_gpu <= prev_total + 1e-9
        prev_w, prev_total = f.weights_gib_per_gpu, per_gpu
        assert f.kv_cache_bytes_per_sequence <= f.kv_cache_bytes_per_token * ctx + 1e-6
        if f.fits:
            assert f.max_concurrent_sequences * f.kv_cache_bytes_per_sequence <= f.kv_cache_gib_available * GIB + 1


def test_estimate_rejects_a_tp_that_does_not_split_the_heads() -> None:
    r = runner.invoke(app, ["estimate", "--model", "llama-3-8b-instruct", "--gpu", "L4", "--tp", "3"])
    assert r.exit_code == 2
    assert "32 attention heads" in r.output and "Traceback" not in r.output
