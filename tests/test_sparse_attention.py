"""DeepSeek sparse attention (DeepSeek-V3.2, `deepseek_v32`; issue 31 item 3): the config is read and
sized from its tensors (the lightning indexer's weights and key cache), and a query attends at most
`index_topk` keys while the indexer reads and scores the whole context
(deepseek-ai/DeepSeek-V3.2-Exp inference/model.py: `index_score.topk(min(self.index_topk, end_pos))`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from sizing.catalog.architectures import ArchitectureError, read_config
from sizing.catalog.lookup import load_catalog
from sizing.catalog.records import ModelArch
from sizing.perf.memory import kv_cache_bytes_per_sequence, kv_cache_bytes_per_token
from sizing.perf.sim import _step_time
from sizing.perf.step import build_step_model

V3 = json.loads((Path(__file__).parent / "data" / "configs" / "deepseek_v3.json").read_text())
# DeepSeek-V3.2-Exp: V3's tensors plus the indexer (inference/model.py ModelArgs: index_n_heads 64,
# index_head_dim 128, index_topk 2048; config.json model_type deepseek_v32)
V32 = {**V3, "model_type": "deepseek_v32", "architectures": ["DeepseekV32ForCausalLM"],
       "index_topk": 2048, "index_n_heads": 64, "index_head_dim": 128}
CAT = load_catalog()


def _arch(c: dict[str, object], name: str) -> ModelArch:
    return ModelArch(**read_config(c, name, "test"))


def test_the_v32_config_is_read_with_its_indexer() -> None:
    v3, v32 = _arch(V3, "v3"), _arch(V32, "v32")
    assert (v32.index_topk, v32.index_n_heads, v32.index_head_dim) == (2048, 64, 128)
    assert v3.index_topk is None
    # the indexer's weights per layer: wq_b (q_lora_rank x 64 x 128), wk (hidden x 128), its LayerNorm, weights_proj
    h, q = V3["hidden_size"], V3["q_lora_rank"]
    per_layer = q * 64 * 128 + h * 128 + 2 * 128 + h * 64
    assert (v32.params_total_b - v3.params_total_b) * 1e9 == pytest.approx(V3["num_hidden_layers"] * per_layer)
    # its key cache: 128 FP8 bytes + one FP32 scale per token per layer, beside the MLA latent
    extra = kv_cache_bytes_per_token(v32, 2.0) - kv_cache_bytes_per_token(v3, 2.0)
    assert extra == V3["num_hidden_layers"] * (128 + 4)
    assert kv_cache_bytes_per_sequence(v32, 32000, 2.0) == pytest.approx(32000 * kv_cache_bytes_per_token(v32, 2.0))


def test_a_topk_without_its_indexer_shape_is_one_line() -> None:
    with pytest.raises(ArchitectureError, match="index_n_heads / index_head_dim are missing"):
        read_config({**V3, "model_type": "deepseek_v32", "index_topk": 2048}, "x", "test")


def _steps(model: ModelArch) -> object:
    return build_step_model(CAT, CAT.calibration, model, "H200", "fp8", 8, 1, "auto", "vllm", "nvlink")


def test_decode_and_prefill_attend_at_most_topk_keys() -> None:
    v3, v32 = _arch(V3, "v3"), _arch(V32, "v32")
    s3, s32 = _steps(v3), _steps(v32)
    # within 2,048 tokens sparse attention reads what dense does (plus the indexer's keys)
    assert s32.kv_read_bytes(1000) == pytest.approx(s3.kv_read_bytes(1000) * s32.kv_bytes_per_token_per_gpu
                                                    / s3.kv_bytes_per_token_per_gpu)
    # at 32k it reads the top 2,048 keys' latent and the indexer's 132 bytes of every token
    assert s32.kv_read_bytes(32000) < 0.2 * s3.kv_read_bytes(32000)
    assert s32.kv_read_bytes(64000) > s32.kv_read_bytes(32000)  # the indexer still grows with the context
    # a 32k-token prompt: its attention is bounded by top-k, so the prefill is far cheaper than dense in the
    # same (absorbed) form, and cheaper than dense MLA's MHA-form prefill too
    absorbed3 = dataclasses.replace(s3, attn_prefill_flops_per_ctx_token_per_gpu=None)
    dense, sparse = absorbed3.step_s(0, 0, 8192, 28000), s32.step_s(0, 0, 8192, 28000)
    assert sparse < 0.5 * dense
    assert sparse < s3.step_s(0, 0, 8192, 28000)
    assert s32.step_s(0, 0, 8192, 1000) == pytest.approx(absorbed3.step_s(0, 0, 8192, 1000), rel=0.05)
    # the simulator's vectorised step agrees with the scalar one
    ctx = np.array([500.0, 3000.0, 40000.0])
    vec = _step_time(s32, ctx, np.array([]), np.array([]))
    assert vec == pytest.approx(s32.step_s(3, float(ctx.mean()), kv_read_bytes=sum(s32.kv_read_bytes(c) for c in ctx)))


def test_dense_mla_prefills_in_the_mha_form_and_decodes_absorbed() -> None:
    """Dense MLA (DeepSeek-V3/R1) runs two attention forms: decode the absorbed, data-movement friendly one
    over the 512 + 64 latent (2·(rank + rope) + 2·rank FLOPs per head per context token), prefill the
    compute friendly MHA one with 192-dim q/k and 128-dim v heads (2·(nope + rope) + 2·v): vLLM's MLA
    backends (`vllm/attention/backends/mla/common.py`: 'Compute Friendly Approach (i.e. "_forward_prefill")
    ... MHA with QK headdim = P + R, V headdim = V'; 'Data-Movement Friendly Approach (i.e.
    "_forward_decode")'), SGLang's DeepseekV2AttentionMLA (0.4.3: `forward_normal` for an extend without a
    cached prefix, `forward_absorb` otherwise). DSA (V3.2) stays absorbed in both: vLLM's
    FlashMLASparseImpl concatenates the absorbed `ql_nope` with `q_pe` over the latent cache."""
    s3 = _steps(_arch(V3, "v3"))
    h, layers = V3["num_attention_heads"], V3["num_hidden_layers"]
    absorbed = 2 * layers * h * ((512 + 64) + 512) / 8
    mha = 2 * layers * h * ((128 + 64) + 128) / 8
    assert s3.attn_flops_per_ctx_token_per_gpu == pytest.approx(absorbed)
    assert s3.attn_prefill_flops_per_ctx_token_per_gpu == pytest.approx(mha)
    # a prompt's attention costs the MHA form's FLOPs, a decode's the absorbed form's
    _, comp_p, _ = s3.parts(0, 0, 8192, 16000)
    _, comp_p0, _ = s3.parts(0, 0, 8192, 0)
    assert comp_p - comp_p0 == pytest.approx(mha * 8192 * 16000 / s3.attn_flops_per_s)
    _, comp_d, _ = s3.parts(64, 16000)
    _, comp_d0, _ = s3.parts(64, 0)
    assert comp_d - comp_d0 == pytest.approx(absorbed * 64 * 16000 / s3.attn_flops_per_s)
    s32 = _steps(_arch(V32, "v32"))
    assert s32.attn_prefill_flops_per_ctx_token_per_gpu == pytest.approx(s32.attn_flops_per_ctx_token_per_gpu)
