"""The bundled catalog's rows (sizing/data/models.csv) through the same readers as a config.json.

A row keeps its model-card parameter counts (`params_total_b`); the reader adds what the row's
columns imply and the sizing needs: `model_type`, the routed-expert parameters (how much of the
model is experts), the MXFP4 experts of gpt-oss. `row_config` rebuilds the config.json fields a
row holds so tests can check a row against its config-derived architecture.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sizing.catalog import ModelArch

# models.csv `family` -> config.json model_type (Phi-4 is a Phi3ForCausalLM)
FAMILY_MODEL_TYPE = {
    "Llama 2": "llama", "Llama 3": "llama", "Llama 3.1": "llama", "Llama 3.2": "llama", "Llama 3.3": "llama",
    "Mistral": "mistral", "Mixtral": "mixtral", "Qwen2.5": "qwen2", "Qwen3": "qwen3", "Gemma 2": "gemma2",
    "DeepSeek-V3": "deepseek_v3", "gpt-oss": "gpt_oss", "Phi-4": "phi3",
}


def model_type_of(m: ModelArch) -> str | None:
    mt = m.model_type or FAMILY_MODEL_TYPE.get(m.family)
    if mt == "qwen3" and m.is_moe:
        return "qwen3_moe"
    return mt


def row_config(m: ModelArch) -> dict[str, Any] | None:
    """The config.json fields a catalog row holds, keyed as its family's config names them."""
    mt = model_type_of(m)
    if mt is None:
        return None
    c: dict[str, Any] = {
        "model_type": mt, "hidden_size": m.hidden_size, "num_hidden_layers": m.num_layers,
        "num_attention_heads": m.num_attention_heads, "num_key_value_heads": m.num_kv_heads,
        "vocab_size": m.vocab_size, "intermediate_size": m.intermediate_size or m.moe_intermediate_size,
        "tie_word_embeddings": m.tie_word_embeddings, "max_position_embeddings": m.max_position_embeddings,
    }
    if m.head_dim:
        c["head_dim"] = m.head_dim
    if m.torch_dtype:
        c["torch_dtype"] = m.torch_dtype
    if m.sliding_window:
        c["sliding_window"] = m.sliding_window
        kinds = ("sliding_attention", "full_attention")
        c["layer_types"] = [kinds[0] if i in m.sliding_window_layers else kinds[1] for i in range(m.num_layers)]
    if mt == "mixtral":
        c.update(num_local_experts=m.moe_num_experts, num_experts_per_tok=m.moe_experts_per_token,
                 intermediate_size=m.moe_intermediate_size)
    elif mt == "qwen3_moe":
        c.update(num_experts=m.moe_num_experts, num_experts_per_tok=m.moe_experts_per_token,
                 moe_intermediate_size=m.moe_intermediate_size)
        c["intermediate_size"] = m.intermediate_size or m.moe_intermediate_size
    elif mt == "gpt_oss":
        c.update(num_local_experts=m.moe_num_experts, num_experts_per_tok=m.moe_experts_per_token,
                 intermediate_size=m.moe_intermediate_size or m.intermediate_size,
                 quantization_config={"quant_method": "mxfp4"})  # every published gpt-oss checkpoint
    elif mt == "deepseek_v3":
        c.update(n_routed_experts=m.moe_num_experts, num_experts_per_tok=m.moe_experts_per_token,
                 n_shared_experts=m.moe_shared_experts, moe_intermediate_size=m.moe_intermediate_size,
                 first_k_dense_replace=m.first_k_dense_layers or 0, kv_lora_rank=m.mla_kv_lora_rank,
                 qk_rope_head_dim=m.mla_qk_rope_head_dim, qk_nope_head_dim=m.mla_qk_nope_head_dim,
                 v_head_dim=m.mla_v_head_dim)
        c.pop("head_dim", None)
    return c


def derived(m: ModelArch) -> ModelArch | None:
    """The row's architecture as its family's reader derives it from the row's own fields."""
    from sizing.architectures import read_config

    c = row_config(m)
    return None if c is None else read_config(c, m.hf_id, m.source)


def complete(m: ModelArch) -> ModelArch:
    """The row with what its reader adds (model_type, expert parameters, native expert format);
    the row's own counts and source stay."""
    d = derived(m)
    if d is None:
        return m
    share = d.expert_params_b / d.params_total_b if d.expert_params_b and d.params_total_b else 0.0
    return dataclasses.replace(
        m, model_type=d.model_type, expert_params_b=share * m.params_total_b if share else None,
        native_expert_format=d.native_expert_format, checkpoint_quant=d.checkpoint_quant)
