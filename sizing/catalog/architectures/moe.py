"""Sparse MoE decoders with GQA attention: Mixtral, Qwen3-MoE (and Qwen2-MoE), Llama 4.

Shapes from transformers:
- modeling_mixtral.py: every layer's MLP is `num_local_experts` SwiGLU experts of
  `intermediate_size` plus a router (hidden x experts, no bias); `num_experts_per_tok` visit a token.
- modeling_qwen3_moe.py: experts of `moe_intermediate_size` on layers with
  `(layer_idx + 1) % decoder_sparse_step == 0` not in `mlp_only_layers`, dense MLP of
  `intermediate_size` elsewhere; q/k RMSNorms. Qwen2-MoE adds a gated shared expert of
  `shared_expert_intermediate_size` and q/k/v biases.
- modeling_llama4.py (text): MoE on layers `interleave_moe_layer_step - 1, ... step` apart,
  each with `num_local_experts` routed experts and one shared expert of `intermediate_size`;
  the other layers a dense MLP of `intermediate_size_mlp`. Attention is chunked (local) on the
  RoPE layers, global on every `no_rope_layer_interval`-th (NoPE) layer: KV of a chunked layer is
  bounded by `attention_chunk_size` (vLLM ChunkedLocalAttention), so it is sized like a window.
  A multimodal Llama 4 config is read through its `text_config`; the vision tower is not counted.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from sizing.catalog.architectures.base import (
    ArchFields,
    BaseConfig,
    Count,
    Counts,
    Dim,
    Experts,
    embeddings,
    glu_mlp,
    gqa_attention,
    parse,
    to_model_arch,
)

MODEL_TYPES = ("mixtral", "qwen3_moe", "qwen2_moe", "llama4_text")



class MixtralConfig(BaseConfig):
    num_local_experts: Experts
    num_experts_per_tok: Experts


class QwenMoeConfig(BaseConfig):
    num_experts: Experts
    num_experts_per_tok: Experts
    moe_intermediate_size: Dim
    decoder_sparse_step: Annotated[int, Field(gt=0, le=1000)] = 1
    mlp_only_layers: list[Count] = Field(default_factory=list)
    shared_expert_intermediate_size: Annotated[int, Field(ge=0, le=1_048_576)] = 0


class Llama4Config(BaseConfig):
    num_local_experts: Experts
    num_experts_per_tok: Experts
    interleave_moe_layer_step: Annotated[int, Field(gt=0, le=1000)] = 1
    intermediate_size_mlp: Dim
    attention_chunk_size: Annotated[int, Field(gt=0, le=1_000_000_000)] | None = None
    no_rope_layer_interval: Annotated[int, Field(gt=0, le=1000)] = 4
    no_rope_layers: list[Annotated[int, Field(ge=0, le=1)]] | None = None


def _check_k(cfg: Any, experts: int, name: str) -> None:
    from sizing.catalog.architectures.base import ArchitectureError

    if cfg.num_experts_per_tok > experts:
        raise ArchitectureError(f"model config {name}: num_experts_per_tok: {cfg.num_experts_per_tok} is more "
                                f"than the {experts} experts")


def read(c: dict[str, Any], name: str, source: str) -> ArchFields:
    mt = c.get("model_type")
    if mt == "mixtral":
        return _mixtral(c, name, source)
    if mt == "llama4_text":
        return _llama4(c, name, source)
    return _qwen_moe(c, name, source)


def _mixtral(c: dict[str, Any], name: str, source: str) -> ArchFields:
    cfg = parse(MixtralConfig, c, name)
    _check_k(cfg, cfg.num_local_experts, name)
    h, n, e, k = cfg.hidden_size, cfg.num_hidden_layers, cfg.num_local_experts, cfg.num_experts_per_tok
    attn = gqa_attention(h, cfg.num_attention_heads, cfg.kv_heads, cfg.hd)
    expert = glu_mlp(h, cfg.intermediate_size)
    base = n * (attn + h * e + 2 * h) + h + embeddings(cfg.vocab_size, h, cfg.tie_word_embeddings)
    w = cfg.sliding_window if cfg.sliding_window and cfg.sliding_window < cfg.max_position_embeddings else None
    counts = Counts(total=base + n * e * expert, active=base + n * k * expert, routed_expert_params=n * e * expert,
                    sliding_window=w, sliding_window_layers=tuple(range(n)) if w else ())
    return to_model_arch(cfg, counts, "mixtral", name, source, moe_num_experts=e, moe_experts_per_token=k,
                         moe_shared_experts=0, moe_intermediate_size=cfg.intermediate_size, first_k_dense_layers=0)


def _qwen_moe(c: dict[str, Any], name: str, source: str) -> ArchFields:
    cfg = parse(QwenMoeConfig, c, name)
    _check_k(cfg, cfg.num_experts, name)
    h, n, e, k = cfg.hidden_size, cfg.num_hidden_layers, cfg.num_experts, cfg.num_experts_per_tok
    q3 = cfg.model_type == "qwen3_moe"
    attn = gqa_attention(h, cfg.num_attention_heads, cfg.kv_heads, cfg.hd, qkv_bias=not q3, qk_norm=q3)
    sparse = [i for i in range(n) if (i + 1) % cfg.decoder_sparse_step == 0 and i not in cfg.mlp_only_layers]
    expert = glu_mlp(h, cfg.moe_intermediate_size)
    shared = glu_mlp(h, cfg.shared_expert_intermediate_size) + h if cfg.shared_expert_intermediate_size else 0
    dense_mlp = glu_mlp(h, cfg.intermediate_size)
    ns = len(sparse)
    base = n * (attn + 2 * h) + ns * (h * e + shared) + (n - ns) * dense_mlp + h + \
        embeddings(cfg.vocab_size, h, cfg.tie_word_embeddings)
    counts = Counts(total=base + ns * e * expert, active=base + ns * k * expert, routed_expert_params=ns * e * expert)
    return to_model_arch(cfg, counts, cfg.model_type, name, source, moe_num_experts=e, moe_experts_per_token=k,
                         moe_shared_experts=1 if shared else 0, moe_intermediate_size=cfg.moe_intermediate_size,
                         first_k_dense_layers=sparse[0] if sparse else n)


def _llama4(c: dict[str, Any], name: str, source: str) -> ArchFields:
    cfg = parse(Llama4Config, c, name)
    _check_k(cfg, cfg.num_local_experts, name)
    h, n, e, k = cfg.hidden_size, cfg.num_hidden_layers, cfg.num_local_experts, cfg.num_experts_per_tok
    step = cfg.interleave_moe_layer_step
    moe_layers = set(range(step - 1, n, step))
    attn = gqa_attention(h, cfg.num_attention_heads, cfg.kv_heads, cfg.hd)
    expert = glu_mlp(h, cfg.intermediate_size)
    nm = len(moe_layers)
    base = n * (attn + 2 * h) + nm * (h * e + expert) + (n - nm) * glu_mlp(h, cfg.intermediate_size_mlp) + h + \
        embeddings(cfg.vocab_size, h, cfg.tie_word_embeddings)
    if cfg.no_rope_layers is not None and len(cfg.no_rope_layers) == n:
        rope_layers = tuple(i for i, r in enumerate(cfg.no_rope_layers) if r)  # 1 = uses RoPE (chunked)
    else:
        rope_layers = tuple(i for i in range(n) if (i + 1) % cfg.no_rope_layer_interval)
    chunk = cfg.attention_chunk_size
    counts = Counts(total=base + nm * e * expert, active=base + nm * k * expert, routed_expert_params=nm * e * expert,
                    sliding_window=chunk, sliding_window_layers=rope_layers if chunk else (),
                    attention_kind="GQA + chunked/global interleaved" if chunk else "GQA")
    return to_model_arch(cfg, counts, "llama4_text", name, source, moe_num_experts=e, moe_experts_per_token=k,
                         moe_shared_experts=1, moe_intermediate_size=cfg.intermediate_size,
                         first_k_dense_layers=min(moe_layers) if moe_layers else n)
