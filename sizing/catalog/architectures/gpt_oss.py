"""gpt-oss (`gpt_oss`): MoE with MXFP4 experts, alternating sliding-window / full attention, sinks.

Shapes from transformers modeling_gpt_oss.py: q/k/v/o with biases, one learned attention sink
per head per layer (`sinks`, no KV), a router with bias, and `num_local_experts` experts whose
fused gate_up projection (h x 2i, bias 2i) and down projection (i x h, bias h) carry biases;
`experts_per_token` per token. `layer_types` says which layers are sliding (window
`sliding_window`) and which are full.

The published checkpoints store the expert weights in MXFP4 (config `quantization_config`:
`quant_method: mxfp4`, `modules_to_not_convert` = attention, router, embeddings, lm_head),
and vLLM serves them as MXFP4 whatever the activation dtype. MXFP4 (OCP Microscaling Formats
(MX) v1.0 spec, section 5: "MXFP4 ... element data type FP4 (E2M1) ... block size 32 ... scale
data type E8M0") costs 4 bits per weight plus one 8-bit scale per 32 weights.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from sizing.catalog.architectures.base import (
    ArchFields,
    ArchitectureError,
    BaseConfig,
    Counts,
    Experts,
    embeddings,
    gqa_attention,
    layers_of_kind,
    parse,
    quant_method,
    to_model_arch,
)

MODEL_TYPES = ("gpt_oss",)



class GptOssConfig(BaseConfig):
    num_local_experts: Experts
    num_experts_per_tok: Experts
    sliding_window: Annotated[int, Field(gt=0, le=1_000_000_000)]
    layer_types: list[str]


def read(c: dict[str, Any], name: str, source: str) -> ArchFields:
    cfg = parse(GptOssConfig, c, name)
    h, n, e, k, i = (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_local_experts, cfg.num_experts_per_tok,
                     cfg.intermediate_size)
    if k > e:
        raise ArchitectureError(f"model config {name}: num_experts_per_tok: {k} is more than the {e} experts")
    sliding = layers_of_kind(cfg.layer_types, n, "sliding_attention", name)
    attn = gqa_attention(h, cfg.num_attention_heads, cfg.kv_heads, cfg.hd, qkv_bias=True, o_bias=True) + \
        cfg.num_attention_heads  # sinks
    expert_weights = 3 * h * i  # gate_up (h x 2i) + down (i x h): the MXFP4 tensors
    expert_bias = 2 * i + h
    base = n * (attn + h * e + e + 2 * h) + h + embeddings(cfg.vocab_size, h, cfg.tie_word_embeddings)
    q = quant_method(c)
    counts = Counts(total=base + n * e * (expert_weights + expert_bias),
                    active=base + n * k * (expert_weights + expert_bias),
                    routed_expert_params=n * e * expert_weights, sliding_window=cfg.sliding_window,
                    sliding_window_layers=sliding, attention_kind="GQA + sliding/full alternating",
                    native_expert_format="mxfp4" if q == "mxfp4" else None, checkpoint_quant=q)
    return to_model_arch(cfg, counts, "gpt_oss", name, source, moe_num_experts=e, moe_experts_per_token=k,
                         moe_shared_experts=0, moe_intermediate_size=i, first_k_dense_layers=0)
