"""DeepSeek-V2/V3 (and R1, Kimi-K2 share the layout) and GLM-4.5/4.6 (`glm4_moe`).

DeepSeek (deepseek-ai modeling_deepseek.py, transformers modeling_deepseek_v3.py): multi-head
latent attention (q through a `q_lora_rank` bottleneck when set; k/v through `kv_lora_rank`
plus a shared `qk_rope_head_dim` key), a dense MLP of `intermediate_size` on the first
`first_k_dense_replace` layers, and on the others `n_routed_experts` experts of
`moe_intermediate_size` (`num_experts_per_tok` per token) plus `n_shared_experts` shared ones.
The KV cache holds the latent: (kv_lora_rank + qk_rope_head_dim) elements per token per layer.

GLM-4.5 (transformers modeling_glm4_moe.py): the same expert layout (routed + shared, dense first
layers, sigmoid router with a per-expert bias) with ordinary GQA attention (q/k/v biases,
`partial_rotary_factor`), so its KV is 2 x kv_heads x head_dim per token per layer.

DeepSeek-V3.2 (`deepseek_v32`; deepseek-ai/DeepSeek-V3.2-Exp inference/model.py @6d8cb70): V3's
layout plus DeepSeek sparse attention. Each MLA layer has a lightning indexer (`wq_b`: q_lora_rank x
index_n_heads x index_head_dim, `wk`: hidden x index_head_dim, its LayerNorm, `weights_proj`: hidden
x index_n_heads) that scores every cached token with an FP8 key cache of index_head_dim elements
(plus an FP32 scale per 128) and keeps `index_topk` of them: `topk_indices =
index_score.topk(min(self.index_topk, end_pos), ...)`; attention then reads only those.

MTP: `num_nextn_predict_layers` extra layers (each an embedding norm, a hidden norm, an
`eh_proj` of 2h x h, one decoder layer with experts, and its own embedding and lm_head copy)
are in the checkpoint after the last layer. vLLM skips them unless speculative decoding uses
them (vllm/model_executor/models/deepseek_v2.py load_weights: "if spec_layer is not None:
continue  # skip spec decode layers for main model"), so they are in the checkpoint size but
not in the served weights. DeepSeek-V3's "671B" excludes them (its README: "685B ... includes
671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP) Module weights").
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from sizing.catalog.architectures.base import (
    ArchFields,
    ArchitectureError,
    BaseConfig,
    Count,
    Counts,
    Dim,
    Experts,
    embeddings,
    glu_mlp,
    gqa_attention,
    parse,
    quant_method,
    to_model_arch,
)

MODEL_TYPES = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe")



class _ExpertFields(BaseConfig):
    n_routed_experts: Experts
    num_experts_per_tok: Experts
    n_shared_experts: Count | None = 0
    moe_intermediate_size: Dim
    first_k_dense_replace: Count = 0
    moe_layer_freq: Annotated[int, Field(gt=0, le=1000)] = 1
    num_nextn_predict_layers: Annotated[int, Field(ge=0, le=100)] = 0


class DeepseekConfig(_ExpertFields):
    kv_lora_rank: Dim
    q_lora_rank: Dim | None = None
    qk_rope_head_dim: Dim
    qk_nope_head_dim: Dim
    v_head_dim: Dim
    # DeepSeek-V3.2's sparse attention (absent: dense)
    index_topk: Dim | None = None
    index_n_heads: Dim | None = None
    index_head_dim: Dim | None = None


class Glm4MoeConfig(_ExpertFields):
    attention_bias: bool = False
    use_qk_norm: bool = False


def _mla_attention(cfg: DeepseekConfig) -> int:
    h, heads = cfg.hidden_size, cfg.num_attention_heads
    qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
    q = h * cfg.q_lora_rank + cfg.q_lora_rank + cfg.q_lora_rank * heads * qk if cfg.q_lora_rank else h * heads * qk
    kv = h * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) + cfg.kv_lora_rank + \
        cfg.kv_lora_rank * heads * (cfg.qk_nope_head_dim + cfg.v_head_dim)
    return q + kv + heads * cfg.v_head_dim * h + _indexer(cfg)


def _indexer(cfg: DeepseekConfig) -> int:
    """DSA's lightning indexer per layer (wq_b, wk, k_norm weight and bias, weights_proj); 0 when dense."""
    if cfg.index_topk is None:
        return 0
    h, ih, hd = cfg.hidden_size, cfg.index_n_heads or 0, cfg.index_head_dim or 0
    return (cfg.q_lora_rank or h) * ih * hd + h * hd + 2 * hd + h * ih


def read(c: dict[str, Any], name: str, source: str) -> ArchFields:
    glm = c.get("model_type") == "glm4_moe"
    cfg: _ExpertFields = parse(Glm4MoeConfig if glm else DeepseekConfig, c, name)
    if isinstance(cfg, DeepseekConfig) and cfg.index_topk and not (cfg.index_n_heads and cfg.index_head_dim):
        raise ArchitectureError(f"model config {name}: index_topk is set but index_n_heads / index_head_dim are "
                                "missing (DeepSeek sparse attention needs all three)")
    h, n, e, k = cfg.hidden_size, cfg.num_hidden_layers, cfg.n_routed_experts, cfg.num_experts_per_tok
    if k > e:
        raise ArchitectureError(f"model config {name}: num_experts_per_tok: {k} is more than the {e} experts")
    if cfg.first_k_dense_replace > n:
        raise ArchitectureError(f"model config {name}: first_k_dense_replace: {cfg.first_k_dense_replace} is "
                                f"more than the {n} layers")
    if isinstance(cfg, Glm4MoeConfig):
        attn = gqa_attention(h, cfg.num_attention_heads, cfg.kv_heads, cfg.hd, qkv_bias=cfg.attention_bias,
                             qk_norm=cfg.use_qk_norm)
    else:
        assert isinstance(cfg, DeepseekConfig)
        attn = _mla_attention(cfg)
    shared_n = cfg.n_shared_experts or 0
    expert = glu_mlp(h, cfg.moe_intermediate_size)
    moe_extra = h * e + (e if glm or c.get("topk_method") == "noaux_tc" else 0)  # router (+ e_score_correction_bias)
    moe_layers = [i for i in range(cfg.first_k_dense_replace, n) if i % cfg.moe_layer_freq == 0]
    nm = len(moe_layers)
    dense = glu_mlp(h, cfg.intermediate_size)
    base = n * (attn + 2 * h) + (n - nm) * dense + nm * (moe_extra + shared_n * expert) + h + \
        embeddings(cfg.vocab_size, h, cfg.tie_word_embeddings)
    mtp_one = 2 * h + 2 * h * h + attn + 2 * h + moe_extra + (shared_n + e) * expert + h + \
        embeddings(cfg.vocab_size, h, False)
    counts = Counts(total=base + nm * e * expert, active=base + nm * k * expert, routed_expert_params=nm * e * expert,
                    mtp_layers=cfg.num_nextn_predict_layers, mtp_params=cfg.num_nextn_predict_layers * mtp_one,
                    attention_kind="GQA" if glm else "MLA", checkpoint_quant=quant_method(c))
    common: dict[str, Any] = dict(moe_num_experts=e, moe_experts_per_token=k, moe_shared_experts=shared_n,
                                  moe_intermediate_size=cfg.moe_intermediate_size,
                                  first_k_dense_layers=cfg.first_k_dense_replace)
    if isinstance(cfg, DeepseekConfig):
        return to_model_arch(cfg, counts, cfg.model_type, name, source, head_dim=None,
                             mla=(cfg.kv_lora_rank, cfg.qk_rope_head_dim, cfg.qk_nope_head_dim, cfg.v_head_dim),
                             sparse=(cfg.index_topk, cfg.index_n_heads or 0, cfg.index_head_dim or 0)
                             if cfg.index_topk else None, **common)
    return to_model_arch(cfg, counts, "glm4_moe", name, source, **common)
