"""Model architectures from a Hugging Face `config.json` (a local file, or fetched from the hub).

Parameter counts are computed from the config when it has none (dense or MoE decoder with
untied/tied embeddings); the catalog's rows keep the official model-card counts instead.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

from sizing.catalog import ModelArch
from sizing.errors import CatalogLookupError


def _params_from_config(c: dict[str, Any], head_dim: int) -> tuple[float, float]:
    """(total, active) parameters in billions, counted from the config's shapes."""
    h, layers, vocab = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    heads, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    attn = h * heads * head_dim + 2 * h * kv * head_dim + heads * head_dim * h
    experts = c.get("num_local_experts") or c.get("num_experts") or 0
    top_k = c.get("num_experts_per_tok") or 0
    ffn_dim = c.get("moe_intermediate_size") or c.get("intermediate_size") or 4 * h
    ffn_one = 3 * h * ffn_dim
    emb = vocab * h * (1 if c.get("tie_word_embeddings", False) else 2)
    if experts:
        total = layers * (attn + experts * ffn_one) + emb
        active = layers * (attn + top_k * ffn_one) + emb
    else:
        total = active = layers * (attn + ffn_one) + emb
    return total / 1e9, active / 1e9


def model_from_config(c: dict[str, Any], name: str, source: str) -> ModelArch:
    """A ModelArch from a parsed config.json (dense, GQA, MoE; MLA when kv_lora_rank is set)."""
    try:
        heads = int(c["num_attention_heads"])
        hidden = int(c["hidden_size"])
        head_dim = int(c.get("head_dim") or hidden // heads)
        total, active = _params_from_config(c, head_dim)
        window = c.get("sliding_window") if c.get("use_sliding_window", True) else None
        layers = int(c["num_hidden_layers"])
        experts = c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts")
        return ModelArch(
            hf_id=name, short_name=name.split("/")[-1].lower(), family=str(c.get("model_type", "custom")),
            params_total_b=total, params_active_b=active, num_layers=layers, hidden_size=hidden,
            intermediate_size=c.get("intermediate_size"), num_attention_heads=heads,
            num_kv_heads=int(c.get("num_key_value_heads", heads)),
            head_dim=None if c.get("kv_lora_rank") else head_dim, vocab_size=int(c["vocab_size"]),
            tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
            max_position_embeddings=int(c.get("max_position_embeddings", 4096)),
            attention_kind="MLA" if c.get("kv_lora_rank") else "GQA",
            sliding_window=int(window) if window else None,
            sliding_window_layers=tuple(range(layers)) if window else (),
            mla_kv_lora_rank=c.get("kv_lora_rank"), mla_qk_rope_head_dim=c.get("qk_rope_head_dim"),
            mla_qk_nope_head_dim=c.get("qk_nope_head_dim"), mla_v_head_dim=c.get("v_head_dim"),
            moe_num_experts=experts, moe_experts_per_token=c.get("num_experts_per_tok"),
            moe_shared_experts=c.get("n_shared_experts"), moe_intermediate_size=c.get("moe_intermediate_size"),
            first_k_dense_layers=c.get("first_k_dense_replace"), torch_dtype=c.get("torch_dtype"),
            source=source, as_of=date.today().isoformat())
    except (KeyError, TypeError, ValueError) as e:
        raise CatalogLookupError(f"model config {name!r} lacks a usable field: {e}") from None


def model_from_config_file(path: Path) -> ModelArch:
    try:
        c = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CatalogLookupError(f"cannot read model config {str(path)!r}: {e}") from None
    return model_from_config(c, c.get("_name_or_path") or path.parent.name or path.stem, f"config file {path}")


def _check_hub_reachable(timeout_s: float = 3.0) -> None:
    """Fail in seconds, not after the hub client's retries, when offline (or HF_HUB_OFFLINE=1)."""
    import os
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise ConnectionError("HF_HUB_OFFLINE is set")
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    with socket.create_connection((host, 443), timeout=timeout_s):
        pass


def model_from_hub(repo_id: str, known: list[str]) -> ModelArch:
    """Fetch `config.json` from the Hugging Face hub (needs network; gated models need HF_TOKEN)."""
    try:
        _check_hub_reachable()
        from huggingface_hub import hf_hub_download

        path = hf_hub_download(repo_id, "config.json", etag_timeout=5)
    except Exception as e:  # offline, gated, or missing: one clear line either way
        raise CatalogLookupError(
            f"model {repo_id!r} is not in the catalog and its config.json could not be fetched from the "
            f"Hugging Face hub ({type(e).__name__}); use a catalog name ({', '.join(known[:8])}, ... see "
            "`llmcap models`) or a path to a config.json") from None
    return model_from_config(json.loads(Path(path).read_text()), repo_id, f"huggingface hub {repo_id}/config.json")
