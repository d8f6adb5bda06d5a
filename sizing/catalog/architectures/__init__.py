"""Architecture readers: a Hugging Face config.json -> a sized `ModelArch`, one module per family.

`read_config(config, name, source)` picks the reader by `model_type` and returns the fields of
the `ModelArch` (`ModelArch(**fields)`: the readers sit below sizing.catalog.lookup in the layers); a
multimodal config is read through its `text_config`; an unknown `model_type` is refused with one line naming it,
never sized as a dense model. See README.md in this folder for adding a family.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sizing.catalog.architectures import deepseek, dense, gemma, gpt_oss, hybrid, moe, phi3
from sizing.catalog.architectures.base import ArchFields, ArchitectureError

if TYPE_CHECKING:
    from sizing.catalog.records import ModelArch

Reader = Callable[[dict[str, Any], str, str], ArchFields]

READERS: dict[str, Reader] = {}
for _mod in (dense, phi3, gemma, moe, deepseek, gpt_oss, hybrid):
    for _mt in _mod.MODEL_TYPES:
        READERS[_mt] = _mod.read

# multimodal wrappers whose language model is in `text_config`
TEXT_CONFIG_TYPES = {"gemma3": "gemma3_text", "llama4": "llama4_text", "qwen3_5": "qwen3_5_text",
                     "qwen3_5_moe": "qwen3_5_moe_text"}

__all__ = ["READERS", "ArchitectureError", "complete", "derived", "known_model_types", "read_config", "row_config"]


def known_model_types() -> list[str]:
    return sorted(READERS)


def read_config(c: Any, name: str, source: str, label: str | None = None) -> ArchFields:
    """The fields of the `sizing.catalog.lookup.ModelArch` a parsed config.json describes, as model
    `name`; ArchitectureError (one line, naming the config as `label`, default `name`) otherwise."""
    fields = _read(c, label or name, source)
    if label and label != name:
        fields.update(hf_id=name, short_name=name.rstrip("/").split("/")[-1].lower())
    return fields


def _read(c: Any, name: str, source: str) -> ArchFields:
    if not isinstance(c, dict):
        raise ArchitectureError(f"model config {name}: must be a JSON object (got {type(c).__name__})")
    mt = c.get("model_type")
    if not isinstance(mt, str) or not mt:
        raise ArchitectureError(f"model config {name}: model_type: missing; a config.json names its architecture "
                                f"family ({', '.join(known_model_types())})")
    if mt in TEXT_CONFIG_TYPES:
        text = c.get("text_config")
        if not isinstance(text, dict):
            raise ArchitectureError(f"model config {name}: text_config: missing (a {mt} config keeps its language "
                                    "model there)")
        inner = {"torch_dtype": c.get("torch_dtype"), **text}
        inner["model_type"] = TEXT_CONFIG_TYPES[mt]
        if "tie_word_embeddings" in c and "tie_word_embeddings" not in text:
            inner["tie_word_embeddings"] = c["tie_word_embeddings"]
        c, mt = inner, inner["model_type"]
    reader = READERS.get(mt)
    if reader is None:
        raise ArchitectureError(f"model config {name}: model_type: {mt[:60]!r} is not an architecture llmcap can "
                                f"size; known: {', '.join(known_model_types())}")
    return reader(c, name, source)


# --- the bundled catalog's rows (sizing/data/models.csv) through the same readers ---------------
# A row keeps its model-card parameter counts (`params_total_b`); its reader adds what the row's
# columns imply and the sizing needs: `model_type`, the routed-expert parameters, the MXFP4 experts
# of gpt-oss. `row_config` rebuilds the config.json fields a row holds, so tests can check a row
# against its config-derived architecture.

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
    c = row_config(m)
    return None if c is None else type(m)(**read_config(c, m.hf_id, m.source))


def complete(m: ModelArch) -> ModelArch:
    """The row with what its reader adds (model_type, expert parameters, native expert format);
    the row's own counts and source stay."""
    try:
        d = derived(m)
    except ArchitectureError:  # a row of a user's catalog that its reader cannot size: kept as it is
        return m
    if d is None:
        return m
    share = d.expert_params_b / d.params_total_b if d.expert_params_b and d.params_total_b else 0.0
    return dataclasses.replace(
        m, model_type=d.model_type, expert_params_b=share * m.params_total_b if share else None,
        native_expert_format=d.native_expert_format, checkpoint_quant=d.checkpoint_quant)
