"""Memory of hybrid linear-attention models (ModelArch.state_layers: gated delta-net, Mamba-2): a
constant-size state per sequence on each state layer, a growing KV cache on each full-attention layer.

Units: bytes; "per replica" is the whole tp-rank model copy, "per GPU" one rank's share.

How vLLM lays it out (vLLM >= 0.10, hybrid KV cache manager):
- A state layer holds one state per running sequence: conv state (conv_dim x (kernel - 1), model dtype)
  and recurrent state (heads x head_dim x state, float32 where the config pins it); shapes and dtypes
  from vllm/model_executor/layers/mamba/mamba_utils.py (quoted in sizing/catalog/architectures/hybrid.py).
  With the default `mamba_cache_mode` "none" (vllm/config/cache.py) a sequence keeps one state, not one
  per block: ASSUMED for every row here (the "align"/"all" prefix-caching modes keep more).
- All layers draw pages from one block pool of ONE page size. vLLM sizes the attention block so that an
  attention page holds at least one state and pads the state's page to it
  (model_executor/models/config.py HybridAttentionMambaModelConfig.verify_and_update_config:
  `attn_block_size = kernel_block_alignment_size * cdiv(mamba_page_size, kernel_block_alignment_size *
  attn_page_size_1_token)` ... `cache_config.mamba_page_size_padded = attn_page_size`), so a sequence
  holds one padded page per state layer and cdiv(tokens, attn_block_size) pages per attention layer.
  The kernel alignment is vLLM's KV block size on CUDA (platform.csv `vllm_kv_block_size`, 16: the
  FlashAttention backend's block sizes are multiples of 16).
- Layers are grouped `min(layers per type)` to a group and one tensor serves one layer of every group
  (v1/core/kv_cache_utils.py _get_kv_cache_config_uniform_page_size); a block of a group is a page on
  each of group_size tensors, so a group short of layers still takes group_size pages per block.
- TP shards the heads (and the conv channels) of every state and attention layer; KV heads fewer than
  tp are replicated (as sizing.perf.memory.kv_replication_factor).
SGLang keeps the states in a separate pool (MambaPool); it is sized here as the unpadded sum.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sizing.catalog.records import ModelArch

CONV_STATE_BYTES = 2.0  # the conv state in the model's 16-bit dtype (MambaStateDtypeCalculator, "auto")


def state_bytes_per_layer(model: ModelArch) -> float:
    """Bytes of one sequence's state on one state layer, whole replica (conv + recurrent)."""
    return model.state_conv_elems * CONV_STATE_BYTES + model.state_ssm_elems * model.state_ssm_bytes


def state_bytes_per_sequence(model: ModelArch) -> float:
    """Bytes of one sequence's states over all state layers, whole replica; 0 for a model without them."""
    return len(model.state_layers) * state_bytes_per_layer(model)


def kv_bytes_per_token_per_layer(model: ModelArch, kv_bytes: float) -> float:
    """KV bytes one token adds on one full-attention layer, whole replica as stored (2 x kv_heads x
    head_dim x bytes)."""
    head_dim = model.head_dim or model.hidden_size // model.num_attention_heads
    return 2.0 * model.num_kv_heads * head_dim * kv_bytes


def vllm_page_layout(model: ModelArch, kv_bytes: float, tp: int, align: int) -> tuple[int, float]:
    """(attention block size in tokens, page bytes per GPU) of vLLM's hybrid block pool:
    attn_block_size = align x cdiv(state page, align x attention page of one token)."""
    kv_heads_gpu = max(model.num_kv_heads / tp, 1.0)
    head_dim = model.head_dim or model.hidden_size // model.num_attention_heads
    attn_1tok = 2.0 * kv_heads_gpu * head_dim * kv_bytes
    state_page = state_bytes_per_layer(model) / tp
    block = align * max(math.ceil(state_page / (align * attn_1tok)), 1)
    return block, block * attn_1tok


def sequence_bytes_per_replica(model: ModelArch, tokens: float, kv_bytes: float, tp: int, engine: str,
                               align: int) -> float:
    """Bytes one sequence of `tokens` holds on one replica of a hybrid model: vLLM's padded pool blocks
    (one per state group, cdiv(tokens, block) per attention group); other engines the unpadded sum
    (states + KV of the attention layers, KV heads replicated beyond their count)."""
    if engine == "vllm":
        block, attn_groups, state_groups, block_bytes = vllm_pool_blocks(model, kv_bytes, tp, align)
        return block_bytes * (state_groups + attn_groups * math.ceil(max(tokens, 1.0) / block))
    rep = max(1.0, tp / model.num_kv_heads)
    return state_bytes_per_sequence(model) + model.kv_layers * tokens * kv_bytes_per_token_per_layer(model, kv_bytes) \
        * rep


def vllm_pool_blocks(model: ModelArch, kv_bytes: float, tp: int, align: int) -> tuple[int, int, int, float]:
    """vLLM's hybrid pool in whole-replica blocks, for the step-level simulator: (tokens per attention
    block, attention groups, state groups, bytes per pool block = page x group size x tp). A sequence
    takes one block per state group and cdiv(tokens, block) per attention group."""
    block, page = vllm_page_layout(model, kv_bytes, tp, align)
    n_state, n_kv = len(model.state_layers), model.kv_layers
    group = min(n_state, n_kv) if n_state and n_kv else max(n_state, n_kv, 1)
    return block, -(-n_kv // group), -(-n_state // group), page * group * tp
