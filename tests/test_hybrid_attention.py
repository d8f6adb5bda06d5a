"""Hybrid linear attention (issue 31 item 3): Qwen3.5 (gated delta-net + gated attention) and Nemotron-H
(Mamba-2 + attention + MoE) configs are read and sized from their tensors; their linear layers keep a
constant-size state per sequence (shapes from vLLM's mamba_utils.py), laid out as vLLM's hybrid block
pool pages it; decode reads that state instead of a KV that grows with the context.

Configs: bench/hybrid_configs/ (sources and dates in its SOURCES.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from sizing.catalog.architectures import ArchitectureError, read_config
from sizing.catalog.calibration import load_calibration
from sizing.catalog.lookup import load_catalog
from sizing.catalog.records import ModelArch
from sizing.perf.memory import (
    GIB,
    kv_cache_bytes_per_token,
    memory_fit,
    sequence_bytes_per_replica,
    state_bytes_per_sequence,
    vllm_page_layout,
    weight_bytes_per_replica,
)
from sizing.perf.replica import ReplicaConfig
from sizing.perf.step import build_step_model, engine_step_s

CONFIGS = Path(__file__).resolve().parents[1] / "bench" / "hybrid_configs"
CAT = load_catalog()
CAL = load_calibration()

# (total B, active B incl. both embedding matrices, tolerance, where the published figures come from)
PUBLISHED = {
    # the model names' own sizes (the language model; the vision tower is not counted, as for Gemma 3 / Llama 4)
    "Qwen3.5-9B": (9.0, 9.0, 0.02, "Qwen/Qwen3.5-9B: 9B (dense)"),
    "Qwen3.5-35B-A3B": (35.0, 3.0, 0.02, "Qwen/Qwen3.5-35B-A3B: 35B total, 3B active (active without the lm_head)"),
    "NVIDIA-Nemotron-3-Nano-30B-A3B": (31.6, 3.6, 0.01, "Nemotron 3 Nano report arXiv:2512.20848: 31.6B total, "
                                       "3.2B active per forward pass (3.6B including embeddings)"),
}


def _config(name: str) -> dict[str, object]:
    return json.loads((CONFIGS / name / "config.json").read_text())


def _arch(name: str) -> ModelArch:
    return ModelArch(**read_config(_config(name), name, "test"))


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_hybrid_config_is_read_and_sized_from_its_tensors(name: str) -> None:
    total, active, tol, _src = PUBLISHED[name]
    m = _arch(name)
    assert m.is_hybrid
    assert m.params_total_b == pytest.approx(total, rel=tol)
    counted = m.params_active_b - (m.vocab_size * m.hidden_size / 1e9 if name == "Qwen3.5-35B-A3B" else 0.0)
    assert counted == pytest.approx(active, rel=0.02)
    # BF16 weights of the served model: 2 bytes per parameter of the tensors counted
    assert weight_bytes_per_replica(m, CAT.precision("bf16")) / GIB == pytest.approx(total * 1e9 * 2 / GIB, rel=tol)


def test_layer_kinds_follow_the_config() -> None:
    q = _arch("Qwen3.5-9B")  # every 4th layer full attention (full_attention_interval 4)
    assert q.state_layers == tuple(i for i in range(32) if (i + 1) % 4) and q.kv_layers == 8
    n = _arch("NVIDIA-Nemotron-3-Nano-30B-A3B")  # MEMEM*E...: 23 Mamba, 23 MoE, 6 attention
    assert (len(n.state_layers), len(n.no_cache_layers), n.kv_layers) == (23, 23, 6)
    assert n.is_moe and n.moe_num_experts == 128 and n.moe_experts_per_token == 6


def test_state_bytes_per_sequence_by_hand() -> None:
    # Qwen3.5-9B gated delta-net: conv_dim = 2 x 16 x 128 + 32 x 128 = 8192 channels x (4 - 1) taps in bf16,
    # recurrent state 32 heads x 128 x 128 in float32 (config mamba_ssm_dtype), on 24 layers
    q = _arch("Qwen3.5-9B")
    assert state_bytes_per_sequence(q) == 24 * (8192 * 3 * 2 + 32 * 128 * 128 * 4)
    # Nemotron-3-Nano Mamba-2: conv_dim = 64 x 64 + 2 x 8 x 128 = 6144 x 3 taps in bf16, state 64 heads x 64
    # x 128 in float32 (mamba_ssm_cache_dtype), on 23 layers
    n = _arch("NVIDIA-Nemotron-3-Nano-30B-A3B")
    assert state_bytes_per_sequence(n) == 23 * (6144 * 3 * 2 + 64 * 64 * 128 * 4)
    # the KV per token is only the full-attention layers': 8 x 2 x 4 KV heads x 256 x 2 bytes
    assert kv_cache_bytes_per_token(q, 2.0) == 8 * 2 * 4 * 256 * 2


def test_vllm_pads_the_attention_page_to_hold_a_state() -> None:
    """attn_block_size = 16 x cdiv(state page, 16 x attention page of one token); the state page is padded
    to the attention page; a sequence holds one page per state layer, cdiv(tokens, block) per KV layer."""
    q = _arch("Qwen3.5-9B")
    state_page = 8192 * 3 * 2 + 32 * 128 * 128 * 4
    one_token = 2 * 4 * 256 * 2
    block, page = vllm_page_layout(q, 2.0, 1, 16)
    assert block == 16 * -(-state_page // (16 * one_token)) == 528
    assert page == block * one_token >= state_page
    # 2,000 tokens: 24 state pages + 8 layers x 4 blocks (group size 8: 3 state groups, 1 attention group)
    assert sequence_bytes_per_replica(q, 2000, 2.0, 1, "vllm", 16) == page * (24 + 8 * 4)


def test_hybrid_holds_more_long_sequences_than_a_dense_model_of_its_size() -> None:
    hybrid = _arch("Qwen3.5-9B")
    dense = CAT.model("qwen3-8b")  # 8.2B dense, smaller weights
    assert hybrid.params_total_b > dense.params_total_b
    ctx = 32768
    fits = {m.short_name: memory_fit(CAT, ReplicaConfig(model=m, gpu="H100-SXM", precision="bf16", tp=1), ctx)
            for m in (hybrid, dense)}
    assert all(f.fits for f in fits.values())
    assert fits[hybrid.short_name].max_concurrent_sequences > 2 * fits[dense.short_name].max_concurrent_sequences


def test_decode_reads_a_constant_state_not_a_growing_kv() -> None:
    h = _arch("Qwen3.5-9B")
    sm = build_step_model(CAT, CAL, h, "H100-SXM", "bf16", 1, 1, "auto", "vllm", "nvlink")
    # the growth with context is the 8 attention layers' KV only; the state is read and written once
    per_tok = kv_cache_bytes_per_token(h, 2.0)
    assert sm.kv_read_bytes(9000) - sm.kv_read_bytes(1000) == pytest.approx(8000 * per_tok)
    assert sm.kv_read_bytes(0) == pytest.approx(2 * state_bytes_per_sequence(h))
    # a hybrid's decode slows with context less than a dense model whose every layer keeps KV
    dense = dataclasses.replace(h, state_layers=(), state_conv_elems=0, state_ssm_elems=0, state_flops_per_token=0.0)
    sd = build_step_model(CAT, CAL, dense, "H100-SXM", "bf16", 1, 1, "auto", "vllm", "nvlink")

    def growth(s: object) -> float:
        return engine_step_s(s, [32768.0] * 64) / engine_step_s(s, [1024.0] * 64)  # type: ignore[arg-type]

    assert growth(sm) < growth(sd)
    # prefill is linear in the prompt on the state layers: attention work only on the 8 attention layers
    assert sm.attn_flops_per_ctx_token_per_gpu == pytest.approx(4.0 * 8 * 16 * 256)


def test_a_bad_hybrid_config_is_one_line_naming_the_field() -> None:
    c = _config("NVIDIA-Nemotron-3-Nano-30B-A3B")
    with pytest.raises(ArchitectureError, match="hybrid_override_pattern: 51 characters for 52 layers"):
        read_config({**c, "hybrid_override_pattern": str(c["hybrid_override_pattern"])[:-1]}, "x", "t")
    q = _config("Qwen3.5-9B")
    text = dict(q["text_config"])  # type: ignore[arg-type]
    text["linear_num_value_heads"] = 24
    with pytest.raises(ArchitectureError, match="linear_num_value_heads: 24 is not a multiple"):
        read_config({**q, "text_config": text}, "x", "t")


def test_planner_plans_a_hybrid_model(tmp_path: Path) -> None:
    from sizing.planning.planner import plan_stack
    from sizing.stack import load_stack

    f = tmp_path / "Pulumi.hybrid.yaml"
    f.write_text(f"""config:
  aws:region: us-east-1
  llmcap:workload:
    model: {CONFIGS / "Qwen3.5-9B" / "config.json"}
    precision: bf16
    prompt_tokens: 1024
    output_tokens: 256
    traffic:
      concurrent_users: 16
    slo:
      ttft_p95_ms: 3000
      itl_p95_ms: 100
  llmcap:hardware:
    gpus: [H100-SXM]
""")
    plan = plan_stack(load_stack(f))
    pool = plan.pools[0]
    assert pool.per_replica.weights_gib_per_gpu * pool.tensor_parallel == pytest.approx(
        _arch("Qwen3.5-9B").params_total_b * 1e9 * 2 / GIB, rel=0.02)
    assert any(a.startswith("model size: Qwen3.5-9B") and "config.json tensor shapes" in a for a in plan.assumptions)
    assert pool.per_replica.max_concurrent_sequences > 0


def test_simulator_step_is_engine_step_s_for_a_hybrid() -> None:
    import numpy as np

    from sizing.perf.sim import _step_time

    sm = build_step_model(CAT, CAL, _arch("Qwen3.5-35B-A3B"), "H200", "bf16", 1, 1, "auto", "vllm", "nvlink")
    ctx, pn, pc = np.array([300.0, 5000.0, 9000.0]), np.array([512.0, 0.0]), np.array([1024.0, 2048.0])
    want = engine_step_s(sm, list(ctx), list(zip(pn, pc, strict=True)))
    assert _step_time(sm, ctx, pn, pc) == pytest.approx(want, rel=1e-12)


def test_simulated_hybrid_burst_runs_more_long_sequences_and_queues_as_n_grows() -> None:
    from sizing.perf.sim import Arrivals, Lengths, simulate

    hybrid = _arch("Qwen3.5-9B")
    dense = CAT.model("qwen3-8b")
    runs = {}
    for m in (hybrid, dense):
        cfg = ReplicaConfig(model=m, gpu="H100-SXM", precision="bf16", tp=1, max_num_seqs=1024)
        runs[m.short_name] = simulate(CAT, cfg, Lengths(16000), Lengths(64), Arrivals.burst(400), seed=1)
    assert runs[hybrid.short_name].max_running > runs[dense.short_name].max_running
    cfg = ReplicaConfig(model=hybrid, gpu="H100-SXM", precision="bf16", tp=1)
    ttft = [simulate(CAT, cfg, Lengths(2048), Lengths(128), Arrivals.burst(n), seed=1).ttft_ms["p50"]
            for n in (64, 512, 2048)]
    assert ttft[0] < ttft[1] < ttft[2]


def test_qwen3_next_is_read_from_its_defaults() -> None:
    """huggingface/transformers configuration_qwen3_next.py defaults (the Qwen3-Next-80B-A3B shape; THUDM/slime
    scripts/models/qwen3-next-80B-A3B.sh agrees: 48 layers, hidden 2048, 16 heads / 2 groups of 256, 512
    experts of 512, top-10, shared 512, vocab 151936, untied). Published: 80B total, 3B activated. No
    mamba_ssm_dtype key: the recurrent state is in the model's 16-bit dtype."""
    c = {"model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 16,
         "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 151936, "tie_word_embeddings": False,
         "intermediate_size": 5632, "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
         "shared_expert_intermediate_size": 512, "decoder_sparse_step": 1, "linear_num_key_heads": 16,
         "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
         "linear_conv_kernel_dim": 4}
    m = ModelArch(**read_config(c, "Qwen/Qwen3-Next-80B-A3B-Instruct", "test"))
    assert m.params_total_b == pytest.approx(80.0, rel=0.01)
    emb = m.vocab_size * m.hidden_size / 1e9
    assert m.params_active_b - 2 * emb == pytest.approx(3.0, rel=0.1)  # "3B activated", rounded
    assert (m.kv_layers, len(m.state_layers), m.state_ssm_bytes) == (12, 36, 2.0)
    assert state_bytes_per_sequence(m) == 36 * (8192 * 3 * 2 + 32 * 128 * 128 * 2)


def test_guidellm_rows_are_a_burst_held_to_its_512_in_flight() -> None:
    """gpsq359b / gpsq35moe: guidellm at request_rate=1000 over 1,000 requests with 'peak concurrent
    requests=512' (guidellm Settings max_concurrency 512): a burst of 512, not 512 users in steady state."""
    from bench.calib_rows import load_rows

    rows = [r for r in load_rows(CAT, None) if r.source in ("gpsq359b", "gpsq35moe") and r.cfg.engine == "vllm"]
    sharegpt = [r for r in rows if r.load == 512.0 and r.shape.prompt_tokens == 342]  # the ShareGPT blocks
    assert sharegpt and all(r.mode == "burst" for r in sharegpt)
    # guidellm's 'Throughput' profile (random 1024/128) sends its 1,000 requests held to 512 in flight: the first
    # wave a burst of 512, then each when one finishes (a capped burst, sizing.perf.capped_burst; helper hybtt)
    thr = [r for r in rows if r.shape.prompt_tokens == 1024]
    assert thr and all(r.mode == "burst" and r.load == 512.0 and r.requests == 1000 for r in thr)


def test_sglang_caps_a_hybrids_running_requests_at_a_third_of_its_state_pool() -> None:
    # SGLang 0.5.9 model_runner_kv_cache_mixin.py: handle_max_mamba_cache gives the states
    # mamba_full_memory_ratio / (1 + ratio) (0.9 / 1.9) of the memory left for caches, and init_memory_pool
    # caps max_num_reqs at max_mamba_cache_size // 3 (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO, radix
    # cache on). GPUStack's Qwen3.5-9B on one H100 under SGLang 0.5.9 (gpsq359b): 512 held in flight, mean
    # TTFT 26 s; the model ran all 512 (the engine's own limit 2,048 and the KV pool allowed it).
    from sizing.perf.load import WorkloadShape, _ctx
    from sizing.perf.memory import GIB, state_bytes_per_sequence

    assert CAT.engine_state_pool("sglang", (0, 5)) == (0.9, 3)
    assert CAT.engine_state_pool("vllm", (0, 17)) is None
    m = _arch("Qwen3.5-9B")
    cfg = ReplicaConfig(model=m, gpu="H100-SXM", precision="bf16", engine="sglang", engine_version=(0, 5),
                        max_num_seqs=2048, max_num_batched_tokens=8192)
    c = _ctx(CAT, cfg, WorkloadShape(342, 281))
    states = int(c.fit.kv_cache_gib_available * GIB * 0.9 / 1.9 / state_bytes_per_sequence(m)) // 3
    assert c.max_running == states < 512
    # vLLM pools states and KV together (its hybrid KV cache manager): no such cap
    assert _ctx(CAT, dataclasses.replace(cfg, engine="vllm", engine_version=(0, 17)),
                WorkloadShape(342, 281)).max_running > 512
