"""Gemma 2 and Gemma 3 (text): alternating local (sliding-window) and global attention.

Shapes from transformers modeling_gemma2.py / modeling_gemma3.py: q/k/v/o without bias, GeGLU
MLP, four RMSNorms per layer (input, post-attention, pre- and post-feedforward), Gemma 3 adds
q/k RMSNorms; embeddings tied (Gemma2Config/Gemma3TextConfig default tie_word_embeddings=True).
Which layers are local: `layer_types` when the config lists it; else Gemma 2 "is_sliding = not
bool(layer_idx % 2)" (even layers local) and Gemma 3 "is_sliding = bool((layer_idx + 1) %
sliding_window_pattern)" (5 local : 1 global for pattern 6).
A multimodal Gemma 3 config (`gemma3` with `text_config`) is read through its text_config;
the vision tower is not counted.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from sizing.catalog.architectures.base import (
    ArchFields,
    BaseConfig,
    Counts,
    embeddings,
    glu_mlp,
    gqa_attention,
    layers_of_kind,
    parse,
    to_model_arch,
)

MODEL_TYPES = ("gemma2", "gemma3_text")


class GemmaConfig(BaseConfig):
    tie_word_embeddings: bool = True
    sliding_window: Annotated[int, Field(gt=0, le=1_000_000_000)]
    sliding_window_pattern: Annotated[int, Field(gt=0, le=1000)] = 6


def read(c: dict[str, Any], name: str, source: str) -> ArchFields:
    cfg = parse(GemmaConfig, c, name)
    h, n = cfg.hidden_size, cfg.num_hidden_layers
    g3 = cfg.model_type == "gemma3_text"
    attn = gqa_attention(h, cfg.num_attention_heads, cfg.kv_heads, cfg.hd, qk_norm=g3)
    total = n * (attn + glu_mlp(h, cfg.intermediate_size) + 4 * h) + h + \
        embeddings(cfg.vocab_size, h, cfg.tie_word_embeddings)
    if "layer_types" in c:
        local = layers_of_kind(c["layer_types"], n, "sliding_attention", name)
    elif g3:
        local = tuple(i for i in range(n) if (i + 1) % cfg.sliding_window_pattern)
    else:
        local = tuple(range(0, n, 2))
    counts = Counts(total=total, active=total, sliding_window=cfg.sliding_window, sliding_window_layers=local,
                    attention_kind="GQA + local/global alternating")
    return to_model_arch(cfg, counts, cfg.model_type, name, source)
