"""Phi-3 / Phi-3.5 / Phi-4 (`phi3`): Llama-shaped, with q/k/v fused into one `qkv_proj` and gate/up
into one `gate_up_proj` (transformers modeling_phi3.py); the counts are the same as unfused.
`sliding_window` (2047 in Phi-3-mini-4k) bounds every layer's attention when it is below the
context."""

from __future__ import annotations

from typing import Any

from sizing.catalog.architectures.base import (
    ArchFields,
    BaseConfig,
    Counts,
    embeddings,
    glu_mlp,
    gqa_attention,
    parse,
    to_model_arch,
)

MODEL_TYPES = ("phi3",)


class Phi3Config(BaseConfig):
    attention_bias: bool = False


def read(c: dict[str, Any], name: str, source: str) -> ArchFields:
    cfg = parse(Phi3Config, c, name)
    h, n = cfg.hidden_size, cfg.num_hidden_layers
    attn = gqa_attention(h, cfg.num_attention_heads, cfg.kv_heads, cfg.hd, qkv_bias=cfg.attention_bias)
    total = n * (attn + glu_mlp(h, cfg.intermediate_size) + 2 * h) + h + \
        embeddings(cfg.vocab_size, h, cfg.tie_word_embeddings)
    w = cfg.sliding_window if cfg.sliding_window and cfg.sliding_window < cfg.max_position_embeddings else None
    counts = Counts(total=total, active=total, sliding_window=w, sliding_window_layers=tuple(range(n)) if w else ())
    return to_model_arch(cfg, counts, "phi3", name, source)
