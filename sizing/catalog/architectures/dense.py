"""Dense decoders with grouped-query attention: Llama (1-3.x), Mistral, Qwen2/2.5, Qwen3.

Source of the shapes: transformers' modeling_llama.py / modeling_mistral.py / modeling_qwen2.py /
modeling_qwen3.py (q/k/v/o projections, SwiGLU MLP, two RMSNorms per layer and a final one;
Qwen2 has q/k/v biases, Qwen3 RMSNorms on q and k). Sliding windows: Mistral applies
`sliding_window` to every layer; Qwen2 only with `use_sliding_window: true`, on the layers from
`max_window_layers` on (transformers Qwen2Attention); Qwen3 likewise.
"""

from __future__ import annotations

from typing import Any

from sizing.catalog.architectures.base import (
    ArchFields,
    BaseConfig,
    Counts,
    Layers,
    embeddings,
    glu_mlp,
    gqa_attention,
    parse,
    to_model_arch,
)

MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")


class DenseConfig(BaseConfig):
    attention_bias: bool = False
    mlp_bias: bool = False
    use_sliding_window: bool = False
    max_window_layers: Layers | None = None


def read(c: dict[str, Any], name: str, source: str) -> ArchFields:
    cfg = parse(DenseConfig, c, name)
    mt = cfg.model_type
    h, n = cfg.hidden_size, cfg.num_hidden_layers
    attn = gqa_attention(h, cfg.num_attention_heads, cfg.kv_heads, cfg.hd,
                         qkv_bias=cfg.attention_bias or mt == "qwen2", o_bias=cfg.attention_bias and mt == "llama",
                         qk_norm=mt == "qwen3")
    mlp = glu_mlp(h, cfg.intermediate_size) + (2 * cfg.intermediate_size + h if cfg.mlp_bias else 0)
    total = n * (attn + mlp + 2 * h) + h + embeddings(cfg.vocab_size, h, cfg.tie_word_embeddings)
    window: int | None = None
    layers: tuple[int, ...] = ()
    if cfg.sliding_window and cfg.sliding_window < cfg.max_position_embeddings:
        if mt in ("llama", "mistral"):
            window, layers = cfg.sliding_window, tuple(range(n))
        elif cfg.use_sliding_window:
            start = cfg.max_window_layers if cfg.max_window_layers is not None else 0
            window, layers = cfg.sliding_window, tuple(range(min(start, n), n))
            window = window if layers else None
    counts = Counts(total=total, active=total, sliding_window=window, sliding_window_layers=layers,
                    attention_kind="MHA" if cfg.kv_heads == cfg.num_attention_heads else "GQA")
    return to_model_arch(cfg, counts, mt, name, source)
