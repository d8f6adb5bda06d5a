"""GPU memory sizing: weights, KV cache, runtime overhead, fit and max concurrent sequences.

Units: bytes where a name says bytes, GiB (2**30 bytes) where it says gib. Scope is in
every name: per GPU, per replica (one model copy over tp × pp GPUs), or per token.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import EngineDefaults, ModelArch, PrecisionFormat
    from sizing.perf.replica import ReplicaConfig

GIB = 2**30
# OCP Microscaling (MX) v1.0, MXFP4: an E2M1 element (4 bits) plus one E8M0 scale (8 bits) per 32-element
# block, the format gpt-oss ships its experts in (ModelArch.native_expert_format == "mxfp4")
MXFP4_BITS_PER_WEIGHT = 4 + 8 / 32
KV_BYTES = {"fp8": 1.0}
INDEXER_SCALE_BLOCK = 128  # DSA indexer keys: one FP32 scale per this many FP8 elements (inference/model.py block_size)


def embedding_params(model: ModelArch) -> float:
    """Parameters in the input embedding and lm_head (counted once when tied)."""
    return model.vocab_size * model.hidden_size * (1 if model.tie_word_embeddings else 2)


def native_expert_bytes_per_param(model: ModelArch) -> float | None:
    """Bytes per routed-expert weight as the published checkpoint stores them, when its experts
    are natively quantized (gpt-oss: MXFP4, 4.25 bits with the block scales); else None."""
    if model.native_expert_format == "mxfp4":
        return MXFP4_BITS_PER_WEIGHT / 8.0
    return None


def dense_bytes_per_param(model: ModelArch, fmt: PrecisionFormat) -> float:
    """Bytes per non-expert weight (attention, router, dense MLP) in format `fmt`. A checkpoint whose
    experts are natively quantized, served in that format, keeps every other linear layer in 16 bits:
    vLLM 0.10.2 vllm/model_executor/layers/quantization/mxfp4.py Mxfp4Config.get_quant_method returns
    UnquantizedLinearMethod for LinearBase layers in the checkpoint's ignored layers and otherwise
    raises "Mxfp4 linear layer is not implemented"; only FusedMoE layers get Mxfp4MoEMethod."""
    if model.native_expert_format and model.native_expert_format == fmt.name:
        return 2.0
    return fmt.bytes_per_param


def vllm_mxfp4_expert_layout(model: ModelArch, generation: str, tp: int) -> tuple[float, float]:
    """How vLLM 0.10.2 lays out MXFP4 experts on a GPU generation: (factor on the checkpoint's
    expert bytes that every kernel reads and memory holds, extra bytes held per checkpoint expert
    byte). vllm/model_executor/layers/quantization/mxfp4.py get_mxfp4_backend() picks MARLIN below
    sm90 ("current_platform.get_device_capability()[0] < 9 ... return Mxfp4Backend.MARLIN"), TRITON on
    Hopper, FlashInfer on sm100; Mxfp4MoEMethod.create_weights pads the per-GPU expert shard:
    MARLIN "intermediate_size_per_partition_after_pad = round_up(intermediate_size_per_partition, 128);
    hidden_size = round_up(hidden_size, 256)", SM100 FlashInfer BF16 both to 256, TRITON the
    intermediate to 64. On TRITON, process_weights_after_loading swizzles the block scales into a new
    tensor (_swizzle_mxfp4) and deletes only w13_weight / w2_weight, so the checkpoint's scales stay
    held beside their copy: 8 scale bits of every 4.25 bits per weight (1/17 of the expert bytes)."""
    inter = (model.moe_intermediate_size or model.intermediate_size or model.hidden_size) / tp
    hidden = float(model.hidden_size)

    def up(x: float, m: int) -> float:
        return math.ceil(x / m) * m

    if generation == "Hopper":
        return up(inter, 64) / inter, (8 / 32) / MXFP4_BITS_PER_WEIGHT
    if generation == "Blackwell":
        return up(inter, 256) * up(hidden, 256) / (inter * hidden), 0.0
    return up(inter, 128) * up(hidden, 256) / (inter * hidden), 0.0


def engine_expert_layout(model: ModelArch, fmt: PrecisionFormat, engine: str, generation: str,
                         tp: int) -> tuple[float, float]:
    """(read-and-held factor, extra-held fraction) of the routed experts as `engine` lays them out:
    vLLM's MXFP4 backends (vllm_mxfp4_expert_layout); (1, 0) for any other engine or format (their
    layouts are not modelled: the checkpoint's bytes)."""
    native = native_expert_bytes_per_param(model)
    if engine == "vllm" and native and model.native_expert_format == "mxfp4" and native <= fmt.bytes_per_param:
        return vllm_mxfp4_expert_layout(model, generation, tp)
    return 1.0, 0.0


def engine_layout_extra_bytes_per_replica(model: ModelArch, fmt: PrecisionFormat, engine: str, generation: str,
                                          tp: int) -> float:
    """Bytes one replica holds beyond its checkpoint's weights because of the engine's expert layout
    (engine_expert_layout: vLLM's MXFP4 padding and the block scales kept beside their copy); 0 else."""
    read, held = engine_expert_layout(model, fmt, engine, generation, tp)
    return expert_weight_bytes_per_replica(model, fmt) * (read * (1 + held) - 1)


def expert_weight_bytes_per_replica(model: ModelArch, fmt: PrecisionFormat) -> float:
    """Bytes of the routed experts of one model copy (0 for a dense model): MXFP4 experts stay
    MXFP4 unless `fmt` is smaller still."""
    experts = (model.expert_params_b or 0.0) * 1e9
    native = native_expert_bytes_per_param(model)
    return experts * (min(native, fmt.bytes_per_param) if native else fmt.bytes_per_param)


def weight_bytes_per_replica(model: ModelArch, fmt: PrecisionFormat, include_mtp: bool = False) -> float:
    """Bytes of all weights of one model copy. Embeddings/lm_head stay 16-bit unless the
    format quantizes them (AWQ, GPTQ and FP8 checkpoints keep them in 16 bits). Experts a
    checkpoint stores natively quantized (gpt-oss MXFP4) keep that size. MTP layers are left out
    (vLLM loads them only for MTP speculative decoding) unless `include_mtp`."""
    total = model.params_total_b * 1e9
    emb = 0.0 if fmt.quantizes_embeddings else min(embedding_params(model), total)
    native = native_expert_bytes_per_param(model)
    experts = min((model.expert_params_b or 0.0) * 1e9, total - emb) if native else 0.0
    mtp = model.mtp_params_b * 1e9 * fmt.bytes_per_param if include_mtp else 0.0
    return (total - emb - experts) * dense_bytes_per_param(model, fmt) + emb * 2.0 + \
        (expert_weight_bytes_per_replica(model, fmt) if native else 0.0) + mtp


def weights_gib_per_gpu(model: ModelArch, fmt: PrecisionFormat, tp: int, pp: int = 1) -> float:
    """Weights held by one GPU of a tp × pp replica (even shards), GiB."""
    return weight_bytes_per_replica(model, fmt) / (tp * pp) / GIB


def kv_dtype_bytes(kv_cache_dtype: str, fmt: PrecisionFormat) -> float:
    """Bytes per KV element: 1 for an fp8 cache, else the 16-bit activation dtype."""
    return KV_BYTES.get(kv_cache_dtype, 2.0)


def _kv_elems_per_token_per_layer(model: ModelArch) -> float:
    if model.is_mla:
        return float((model.mla_kv_lora_rank or 0) + (model.mla_qk_rope_head_dim or 0))
    head_dim = model.head_dim or model.hidden_size // model.num_attention_heads
    return 2.0 * model.num_kv_heads * head_dim


def indexer_bytes_per_token_per_layer(model: ModelArch) -> float:
    """DeepSeek sparse attention's indexer key cache per token per layer, bytes: index_head_dim FP8
    elements plus one FP32 scale per 128 (DeepSeek-V3.2-Exp inference/model.py Indexer: `k_cache`
    float8_e4m3fn of head_dim, `k_scale_cache` float32 of head_dim // block_size, block_size 128),
    whatever the KV cache dtype; 0 for dense attention."""
    if not model.index_topk or not model.index_head_dim:
        return 0.0
    return float(model.index_head_dim + model.index_head_dim // INDEXER_SCALE_BLOCK * 4)


def kv_cache_bytes_per_token(model: ModelArch, kv_bytes: float) -> float:
    """KV bytes one token adds to one replica, over all layers (2 × layers × kv_heads × head_dim
    × bytes; MLA: latent + rope dims; DSA: plus the indexer's key cache). Sliding-window layers
    count fully here: this is the per-token figure for sequences within the window. Hybrid models: only
    their full-attention layers (ModelArch.kv_layers); their constant states are per sequence."""
    return model.kv_layers * (_kv_elems_per_token_per_layer(model) * kv_bytes
                               + indexer_bytes_per_token_per_layer(model))


def kv_bytes_per_token_by_layer_kind(model: ModelArch, kv_bytes: float) -> dict[str, float]:
    """KV bytes one token adds to one replica, per layer kind, summed over the layers of that
    kind: "mla" (latent kv_lora_rank + qk_rope_head_dim per layer), "full" (2 x kv_heads x
    head_dim per layer) and "sliding" (the same per layer, but held for at most
    `sliding_window` tokens)."""
    per_layer = _kv_elems_per_token_per_layer(model) * kv_bytes
    if model.is_mla:
        return {"mla": model.num_layers * (per_layer + indexer_bytes_per_token_per_layer(model))}
    n_window = len(model.sliding_window_layers) if model.sliding_window else 0
    out = {"full": (model.kv_layers - n_window) * per_layer}
    if n_window:
        out["sliding"] = n_window * per_layer
    return out


def kv_cache_bytes_per_sequence(model: ModelArch, tokens: float, kv_bytes: float) -> float:
    """KV bytes of one sequence of `tokens` on one replica; sliding-window layers hold at most
    their window; a hybrid model's state layers their constant state (below, the hybrid section)."""
    per_layer = _kv_elems_per_token_per_layer(model) * kv_bytes + indexer_bytes_per_token_per_layer(model)
    n_window = len(model.sliding_window_layers) if model.sliding_window else 0
    window_tokens = min(tokens, model.sliding_window or tokens)
    return per_layer * ((model.kv_layers - n_window) * tokens + n_window * window_tokens) + \
        state_bytes_per_sequence(model)


def kv_replication_factor(model: ModelArch, tp: int) -> float:
    """How many times the replica stores each KV element across its tp ranks: MLA's latent is
    replicated on every rank; GQA heads are replicated when tp exceeds the KV head count."""
    if model.is_mla:
        return float(tp)
    return max(1.0, tp / model.num_kv_heads)




def runtime_overhead_gib_per_gpu(model: ModelArch, engine: EngineDefaults, tp: int,
                                 max_num_batched_tokens: int | None = None,
                                 max_num_seqs: int | None = None) -> float:
    """Memory the engine keeps besides weights and KV, per GPU (GiB): CUDA context, CUDA graphs, and
    the activation peak of one scheduler step (MLP intermediates of the token budget, plus the
    logits of the sequences it samples). vLLM's memory profile samples min(max_num_seqs,
    max_num_batched_tokens) dummy requests over the whole vocabulary on every TP rank, holding
    engines.csv `profile_sampler_bytes_per_logit` per logit (the source there) out of the KV budget;
    an engine without that figure: fp32 logits of its default batch, vocabulary-sharded."""
    tokens = max_num_batched_tokens or engine.default_max_num_batched_tokens
    ffn = model.moe_intermediate_size * (model.moe_experts_per_token or 1) if model.is_moe and \
        model.moe_intermediate_size else (model.intermediate_size or 4 * model.hidden_size)
    act_bytes = tokens * (2 * ffn / tp + 4 * model.hidden_size) * 2.0
    if engine.profile_sampler_bytes_per_logit is not None:
        logits_bytes = min(max_num_seqs or engine.default_max_num_seqs, tokens) * model.vocab_size \
            * engine.profile_sampler_bytes_per_logit
    else:
        logits_bytes = engine.default_max_num_seqs * model.vocab_size / tp * 4.0
    return engine.cuda_context_gib_per_gpu + engine.cuda_graphs_gib_per_gpu + (act_bytes + logits_bytes) / GIB


@dataclass(frozen=True)
class MemoryFit:
    """Memory of one replica (tp × pp GPUs) of a model on one GPU type."""

    gpu_memory_gib_per_gpu: float
    gpu_memory_utilization: float
    weights_gib_per_gpu: float
    weights_gib: float  # whole replica
    overhead_gib_per_gpu: float
    kv_cache_gib_per_gpu: float
    kv_cache_gib_available: float  # whole replica
    kv_cache_bytes_per_token: float  # whole replica, as stored (including TP replication)
    context_tokens: int
    kv_cache_bytes_per_sequence: float  # whole replica, at context_tokens
    max_concurrent_sequences: int  # at context_tokens
    fits: bool
    reason: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def memory_fit(catalog: Catalog, cfg: ReplicaConfig, context_tokens: int,
               gpu_memory_gib: float | None = None) -> MemoryFit:
    """Does the model fit a tp × pp replica of `cfg.gpu`, and how many sequences of `context_tokens`
    can its KV cache hold at once? `gpu_memory_gib`: the GPU memory per GPU when an instance's
    differs from the GPU's datasheet (GiB); the engine's limits None take engines.csv's defaults."""
    model, gpu, precision, tp, pp = cfg.model, cfg.gpu, cfg.precision, cfg.tp, cfg.pp
    kv_cache_dtype, engine, max_num_batched_tokens = cfg.kv_cache_dtype, cfg.engine, cfg.max_num_batched_tokens
    gpu_memory_utilization = cfg.gpu_memory_utilization
    fmt = catalog.precision(precision)
    eng = catalog.engine(engine)
    util = gpu_memory_utilization or eng.default_gpu_memory_utilization
    mem = gpu_memory_gib or catalog.gpu_usable_memory_gib(gpu)
    w_gpu = weights_gib_per_gpu(model, fmt, tp, pp)
    if cfg.spec is not None and cfg.spec.method == "mtp":  # MTP drafts load the checkpoint's MTP layers
        w_gpu += (weight_bytes_per_replica(model, fmt, include_mtp=True) - weight_bytes_per_replica(model, fmt)) \
            / (tp * pp) / GIB
    extra = engine_layout_extra_bytes_per_replica(model, fmt, engine, catalog.gpu(gpu).generation, tp)
    w_gpu += extra / (tp * pp) / GIB
    over = runtime_overhead_gib_per_gpu(model, eng, tp, max_num_batched_tokens, cfg.max_num_seqs)
    outside = 0.0  # GiB the runtime needs outside the engine's fraction (weights-kv engines)
    if eng.memory_fraction_covers == "weights-kv":
        # SGLang: the fraction of the memory left after the CUDA context holds weights and the KV pool;
        # CUDA graphs and activations must fit in the rest (engines.csv memory_fraction_covers, its source)
        kv_gpu = (mem - eng.cuda_context_gib_per_gpu) * util - w_gpu
        outside = (over - eng.cuda_context_gib_per_gpu) - (mem - eng.cuda_context_gib_per_gpu) * (1 - util)
    elif eng.memory_fraction_covers == "free":
        # TensorRT-LLM: kv_cache_free_gpu_mem_fraction of the memory still free once the engine (weights,
        # activations, context) is loaded (engines.csv memory_fraction_covers, its source)
        kv_gpu = (mem - w_gpu - over) * util
    else:
        kv_gpu = mem * util - w_gpu - over
    kvb = kv_dtype_bytes(kv_cache_dtype, fmt)
    rep = kv_replication_factor(model, tp)
    per_token = kv_cache_bytes_per_token(model, kvb) * rep
    per_seq = kv_cache_bytes_per_sequence(model, context_tokens, kvb) * rep
    if model.is_hybrid:  # the engine's own layout of states and KV (vLLM pads both to one page size)
        per_seq = sequence_bytes_per_replica(model, context_tokens, kvb, tp, engine,
                                             int(catalog.number("vllm_kv_block_size")))
    kv_replica = max(kv_gpu, 0.0) * tp * pp
    max_seqs = int(math.floor(kv_replica * GIB / per_seq)) if per_seq > 0 else 0
    if outside > 0:
        runtime = over - eng.cuda_context_gib_per_gpu
        fits, reason = False, (f"CUDA graphs and activations need {runtime:.1f} GiB per GPU "
                               f"outside --mem-fraction-static {util:g}, which leaves "
                               f"{(mem - eng.cuda_context_gib_per_gpu) * (1 - util):.1f} GiB")
    elif kv_gpu <= 0:
        fits, reason = False, (f"weights {w_gpu:.1f} GiB + overhead {over:.1f} GiB per GPU exceed "
                               f"{util:.0%} of {mem:.1f} GiB")
    elif max_seqs < 1:
        fits, reason = False, (f"KV cache of {kv_gpu:.1f} GiB per GPU cannot hold one {context_tokens}-token "
                               f"sequence ({per_seq / GIB / (tp * pp):.1f} GiB per GPU)")
    else:
        fits, reason = True, "fits"
    return MemoryFit(
        gpu_memory_gib_per_gpu=mem, gpu_memory_utilization=util, weights_gib_per_gpu=w_gpu,
        weights_gib=w_gpu * tp * pp, overhead_gib_per_gpu=over, kv_cache_gib_per_gpu=max(kv_gpu, 0.0),
        kv_cache_gib_available=kv_replica, kv_cache_bytes_per_token=per_token, context_tokens=context_tokens,
        kv_cache_bytes_per_sequence=per_seq, max_concurrent_sequences=max_seqs, fits=fits, reason=reason)


# --- hybrid linear attention (ModelArch.state_layers) ----------------------------------------------
# Memory of hybrid linear-attention models (ModelArch.state_layers: gated delta-net, Mamba-2): a
# constant-size state per sequence on each state layer, a growing KV cache on each full-attention layer.
#
# Units: bytes; "per replica" is the whole tp-rank model copy, "per GPU" one rank's share.
#
# How vLLM lays it out (vLLM >= 0.10, hybrid KV cache manager):
# - A state layer holds one state per running sequence: conv state (conv_dim x (kernel - 1), model dtype)
#   and recurrent state (heads x head_dim x state, float32 where the config pins it); shapes and dtypes
#   from vllm/model_executor/layers/mamba/mamba_utils.py (quoted in sizing/catalog/architectures/hybrid.py).
#   With the default `mamba_cache_mode` "none" (vllm/config/cache.py) a sequence keeps one state, not one
#   per block: ASSUMED for every row here (the "align"/"all" prefix-caching modes keep more).
# - All layers draw pages from one block pool of ONE page size. vLLM sizes the attention block so that an
#   attention page holds at least one state and pads the state's page to it
#   (model_executor/models/config.py HybridAttentionMambaModelConfig.verify_and_update_config:
#   `attn_block_size = kernel_block_alignment_size * cdiv(mamba_page_size, kernel_block_alignment_size *
#   attn_page_size_1_token)` ... `cache_config.mamba_page_size_padded = attn_page_size`), so a sequence
#   holds one padded page per state layer and cdiv(tokens, attn_block_size) pages per attention layer.
#   The kernel alignment is vLLM's KV block size on CUDA (platform.csv `vllm_kv_block_size`, 16: the
#   FlashAttention backend's block sizes are multiples of 16).
# - Layers are grouped `min(layers per type)` to a group and one tensor serves one layer of every group
#   (v1/core/kv_cache_utils.py _get_kv_cache_config_uniform_page_size); a block of a group is a page on
#   each of group_size tensors, so a group short of layers still takes group_size pages per block.
# - TP shards the heads (and the conv channels) of every state and attention layer; KV heads fewer than
#   tp are replicated (as sizing.perf.memory.kv_replication_factor).
# SGLang keeps the states in a separate pool (MambaPool); it is sized here as the unpadded sum.

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
