"""Hybrid linear-attention decoders: Qwen3-Next and Qwen3.5 (gated delta-net + gated full attention)
and Nemotron-H (Mamba-2 + attention + MLP / MoE blocks).

Most layers of these models keep a constant-size state per sequence instead of a KV cache that grows
with the context; a few full-attention layers keep the KV. The reader records which layers are which
and the state's shape; sizing/perf/memory.py (its hybrid section) turns that into bytes as vLLM lays them out.

Shapes (exact tensors) from transformers:
- modeling_qwen3_next.py / modeling_qwen3_5.py / modeling_qwen3_5_moe.py. `layer_types` (or every
  `full_attention_interval`-th layer: `"linear_attention" if bool((i + 1) % interval) else
  "full_attention"`, configuration_qwen3_5.py) picks the mixer. A gated delta-net layer
  (`linear_attn`): in_proj_qkvz (hidden -> 2 key_dim + 2 value_dim; Qwen3.5 splits it into in_proj_qkv
  and in_proj_z, same count), in_proj_ba (hidden -> 2 num_v_heads; Qwen3.5's in_proj_b / in_proj_a),
  a depthwise conv1d over conv_dim = 2 key_dim + value_dim channels of `linear_conv_kernel_dim` taps
  (no bias), dt_bias and A_log (num_v_heads each), a gated RMSNorm of head_v_dim and out_proj
  (value_dim -> hidden); key_dim = linear_num_key_heads x linear_key_head_dim, value_dim =
  linear_num_value_heads x linear_value_head_dim. A full-attention layer (`self_attn`) is GQA with an
  output gate (`attn_output_gate`: q_proj is 2 x heads x head_dim wide) and q/k RMSNorms. The MLP is
  dense (`intermediate_size`, Qwen3.5 dense) or sparse: `num_experts` experts of `moe_intermediate_size`,
  a router, one shared expert of `shared_expert_intermediate_size` and its 1-wide sigmoid gate
  (Qwen3-Next: on layers `(i + 1) % decoder_sparse_step == 0` not in `mlp_only_layers`; Qwen3.5-MoE:
  every layer). `mtp_num_hidden_layers` MTP layers (one full-attention decoder layer, two RMSNorms and
  an fc of 2 hidden -> hidden, the embedding shared) are in the checkpoint, loaded only for MTP drafts.
  A multimodal Qwen3.5 config is read through its `text_config`; the vision tower is not counted.
- modeling_nemotron_h.py. `hybrid_override_pattern` has one character per layer: `M` a Mamba-2 mixer,
  `*` attention, `-` an MLP, `E` a mixture of experts; each block is one RMSNorm and its mixer. Mamba-2:
  in_proj (hidden -> 2 I + 2 n_groups ssm_state_size + heads, I = mamba_num_heads x mamba_head_dim),
  conv1d over conv_dim = I + 2 n_groups ssm_state_size channels of `conv_kernel` taps (+ bias when
  `use_conv_bias`), dt_bias, A_log and D (heads each), a gated RMSNorm of I and out_proj (I -> hidden).
  Attention: GQA q/k/v/o. MLP: up and down (relu2, no gate). MoE: a router (n_routed_experts x hidden
  plus e_score_correction_bias), experts of up and down of `moe_intermediate_size`, and
  `n_shared_experts` shared experts of `moe_shared_expert_intermediate_size`. Embeddings untied.

States per sequence and layer (vLLM vllm/model_executor/layers/mamba/mamba_utils.py
MambaStateShapeCalculator): gated delta-net `conv_state_shape = (conv_dim, conv_kernel_size - 1)`,
`temporal_state_shape = (num_v_heads, head_v_dim, head_k_dim)`; Mamba-2 `conv_dim = intermediate_size
+ 2 * n_groups * state_size`, `conv_state_shape = (conv_dim, conv_kernel - 1)`, `temporal_state_shape =
(num_heads, head_dim, state_size)`. Their dtypes (MambaStateDtypeCalculator._mamba_state_dtype): the conv
state in the model's dtype; the temporal state in `mamba_ssm_cache_dtype`, which vLLM takes from the
config when the user leaves it "auto": Qwen3.5's `mamba_ssm_dtype` (model_executor/models/config.py
Qwen3_5ForConditionalGenerationConfig: `mamba_ssm_dtype = getattr(hf_text_config, "mamba_ssm_dtype",
None)`), Nemotron-H's `mamba_ssm_cache_dtype` defaulting to float32 (NemotronHForCausalLMConfig
DEFAULT_MAMBA_SSM_CACHE_DTYPE = "float32", "Only `float32` is known to have no accuracy issues by
default"); Qwen3-Next without either key: the model's dtype.

Recurrence FLOPs per token (from the update rules, not fitted): gated delta rule per value head
S <- a S + b (v - a S k) k^T, o = S^T q: three dk x dv multiply-adds (S k, the rank-1 update, S q) =
6 dk dv FLOPs; Mamba-2 per head h <- exp(dt A) h + dt x B^T, y = h C: two head_dim x state multiply-adds
= 4 head_dim state FLOPs.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from sizing.catalog.architectures.base import (
    ArchFields,
    ArchitectureError,
    BaseConfig,
    Count,
    Counts,
    Dim,
    Experts,
    Heads,
    embeddings,
    glu_mlp,
    gqa_attention,
    layers_of_kind,
    parse,
    quant_method,
    to_model_arch,
)

MODEL_TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "nemotron_h")

# bytes per element of a state dtype named in a config
STATE_DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0}
MODEL_DTYPE_BYTES = 2.0  # the conv state, in the served 16-bit dtype (bf16 / fp16)
Small = Annotated[int, Field(gt=0, le=1024)]


class QwenHybridConfig(BaseConfig):
    intermediate_size: Dim | None = None  # type: ignore[assignment]  # absent in Qwen3.5-MoE configs
    linear_num_key_heads: Heads
    linear_num_value_heads: Heads
    linear_key_head_dim: Dim
    linear_value_head_dim: Dim
    linear_conv_kernel_dim: Small
    full_attention_interval: Small = 4
    attn_output_gate: bool = True
    num_experts: Annotated[int, Field(ge=0, le=100_000)] = 0
    num_experts_per_tok: Annotated[int, Field(ge=0, le=100_000)] = 0
    moe_intermediate_size: Dim | None = None
    shared_expert_intermediate_size: Annotated[int, Field(ge=0, le=1_048_576)] = 0
    decoder_sparse_step: Small = 1
    mlp_only_layers: list[Count] = Field(default_factory=list)
    mtp_num_hidden_layers: Annotated[int, Field(ge=0, le=100)] = 0
    mamba_ssm_dtype: str | None = Field(default=None, max_length=20)


class NemotronHConfig(BaseConfig):
    hybrid_override_pattern: str = Field(min_length=1, max_length=100_000, pattern=r"^[M*\-E]+$")
    mamba_num_heads: Heads
    mamba_head_dim: Dim
    ssm_state_size: Dim
    n_groups: Heads
    conv_kernel: Small
    use_conv_bias: bool = True
    use_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    n_routed_experts: Experts | None = None
    num_experts_per_tok: Experts | None = None
    moe_intermediate_size: Dim | None = None
    moe_shared_expert_intermediate_size: Annotated[int, Field(ge=0, le=1_048_576)] = 0
    n_shared_experts: Count = 1
    mamba_ssm_cache_dtype: str = Field(default="float32", max_length=20)


def _state_bytes(name: str, field: str, dtype: str | None) -> float:
    if dtype is None:
        return MODEL_DTYPE_BYTES
    if dtype not in STATE_DTYPE_BYTES:
        raise ArchitectureError(f"model config {name}: {field}: {dtype[:20]!r} is not one of "
                                f"{', '.join(STATE_DTYPE_BYTES)}")
    return STATE_DTYPE_BYTES[dtype]


def read(c: dict[str, Any], name: str, source: str) -> ArchFields:
    c = dict(c)
    if c.get("torch_dtype") is None and isinstance(c.get("dtype"), str):  # newer configs write `dtype`
        c["torch_dtype"] = c["dtype"]
    if c.get("model_type") == "nemotron_h":
        return _nemotron_h(c, name, source)
    return _qwen_hybrid(c, name, source)


def _qwen_hybrid(c: dict[str, Any], name: str, source: str) -> ArchFields:
    cfg = parse(QwenHybridConfig, c, name)
    h, n = cfg.hidden_size, cfg.num_hidden_layers
    if "layer_types" in c:
        full = layers_of_kind(c["layer_types"], n, "full_attention", name)
        linear = layers_of_kind(c["layer_types"], n, "linear_attention", name)
        if len(full) + len(linear) != n:
            raise ArchitectureError(f"model config {name}: layer_types: every entry must be full_attention or "
                                    "linear_attention")
    else:
        linear = tuple(i for i in range(n) if (i + 1) % cfg.full_attention_interval)
        full = tuple(i for i in range(n) if not (i + 1) % cfg.full_attention_interval)
    nk, nv, dk, dv = cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim, \
        cfg.linear_value_head_dim
    if nv % nk:
        raise ArchitectureError(f"model config {name}: linear_num_value_heads: {nv} is not a multiple of "
                                f"linear_num_key_heads {nk}")
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    gdn = h * (2 * key_dim + 2 * value_dim) + h * 2 * nv + conv_dim * cfg.linear_conv_kernel_dim + 2 * nv + dv + \
        value_dim * h
    hd, heads, kv = cfg.hd, cfg.num_attention_heads, cfg.kv_heads
    attn = gqa_attention(h, heads, kv, hd, qk_norm=True) + (h * heads * hd if cfg.attn_output_gate else 0)
    moe_type = cfg.model_type != "qwen3_5_text" and cfg.num_experts > 0
    e, k = cfg.num_experts, cfg.num_experts_per_tok
    if moe_type:
        if not cfg.moe_intermediate_size or not k:
            raise ArchitectureError(f"model config {name}: moe_intermediate_size / num_experts_per_tok: missing "
                                    f"(the {cfg.model_type} reader needs them with num_experts {e})")
        if k > e:
            raise ArchitectureError(f"model config {name}: num_experts_per_tok: {k} is more than the {e} experts")
        step = 1 if cfg.model_type == "qwen3_5_moe_text" else cfg.decoder_sparse_step
        sparse = [i for i in range(n) if (i + 1) % step == 0 and i not in cfg.mlp_only_layers]
    else:
        sparse = []
    if len(sparse) < n and not cfg.intermediate_size:
        raise ArchitectureError(f"model config {name}: intermediate_size: missing (the dense MLP layers need it)")
    dense_mlp = glu_mlp(h, cfg.intermediate_size or 0)
    expert = glu_mlp(h, cfg.moe_intermediate_size or 0)
    si = cfg.shared_expert_intermediate_size
    shared = glu_mlp(h, si) + h if si else 0  # the shared expert and its sigmoid gate
    ns = len(sparse)
    base = len(linear) * gdn + len(full) * attn + n * 2 * h + ns * (h * e + shared) + (n - ns) * dense_mlp + h + \
        embeddings(cfg.vocab_size, h, cfg.tie_word_embeddings)
    mlp_one = (h * e + shared + e * expert) if moe_type else dense_mlp
    mtp_one = attn + 2 * h + mlp_one + 2 * h + 2 * h * h + h
    state = dict(state_layers=linear, no_cache_layers=(), state_conv_elems=conv_dim * (cfg.linear_conv_kernel_dim - 1),
                 state_ssm_elems=nv * dk * dv,
                 state_ssm_bytes=_state_bytes(name, "mamba_ssm_dtype", cfg.mamba_ssm_dtype),
                 state_flops_per_token=6.0 * nv * dk * dv * len(linear))
    counts = Counts(total=base + ns * e * expert, active=base + ns * k * expert, routed_expert_params=ns * e * expert,
                    mtp_layers=cfg.mtp_num_hidden_layers, mtp_params=cfg.mtp_num_hidden_layers * mtp_one,
                    attention_kind="gated delta-net + gated GQA hybrid", checkpoint_quant=quant_method(c))
    moe: dict[str, Any] = dict(moe_num_experts=e, moe_experts_per_token=k, moe_shared_experts=1 if si else 0,
                               moe_intermediate_size=cfg.moe_intermediate_size,
                               first_k_dense_layers=sparse[0] if sparse else n) if moe_type else {}
    return to_model_arch(cfg, counts, cfg.model_type, name, source, hybrid=state, **moe)


def _nemotron_h(c: dict[str, Any], name: str, source: str) -> ArchFields:
    cfg = parse(NemotronHConfig, c, name)
    h, n, pattern = cfg.hidden_size, cfg.num_hidden_layers, cfg.hybrid_override_pattern
    if len(pattern) != n:
        raise ArchitectureError(f"model config {name}: hybrid_override_pattern: {len(pattern)} characters for "
                                f"{n} layers (one of M, *, -, E per layer)")
    kinds = {ch: tuple(i for i, x in enumerate(pattern) if x == ch) for ch in "M*-E"}
    heads, hdim, ns, g = cfg.mamba_num_heads, cfg.mamba_head_dim, cfg.ssm_state_size, cfg.n_groups
    inner = heads * hdim
    conv_dim = inner + 2 * g * ns
    proj_out = 2 * inner + 2 * g * ns + heads
    mamba = h * proj_out + (proj_out if cfg.use_bias else 0) + conv_dim * cfg.conv_kernel + \
        (conv_dim if cfg.use_conv_bias else 0) + 3 * heads + inner + inner * h + (h if cfg.use_bias else 0)
    attn = gqa_attention(h, cfg.num_attention_heads, cfg.kv_heads, cfg.hd, qkv_bias=cfg.attention_bias,
                         o_bias=cfg.attention_bias)
    mlp = 2 * h * cfg.intermediate_size + ((cfg.intermediate_size + h) if cfg.mlp_bias else 0)
    e, k = cfg.n_routed_experts or 0, cfg.num_experts_per_tok or 0
    if kinds["E"] and not (e and k and cfg.moe_intermediate_size):
        raise ArchitectureError(f"model config {name}: n_routed_experts / num_experts_per_tok / "
                                "moe_intermediate_size: missing (hybrid_override_pattern has E layers)")
    if k > e:
        raise ArchitectureError(f"model config {name}: num_experts_per_tok: {k} is more than the {e} experts")
    expert = 2 * h * (cfg.moe_intermediate_size or 0)
    shared = cfg.n_shared_experts * 2 * h * cfg.moe_shared_expert_intermediate_size
    router = e * h + e
    nm = len(kinds["E"])
    base = len(kinds["M"]) * mamba + len(kinds["*"]) * attn + len(kinds["-"]) * mlp + nm * (router + shared) + \
        n * h + h + embeddings(cfg.vocab_size, h, cfg.tie_word_embeddings)
    state = dict(state_layers=kinds["M"], no_cache_layers=tuple(sorted(kinds["-"] + kinds["E"])),
                 state_conv_elems=conv_dim * (cfg.conv_kernel - 1), state_ssm_elems=heads * hdim * ns,
                 state_ssm_bytes=_state_bytes(name, "mamba_ssm_cache_dtype", cfg.mamba_ssm_cache_dtype),
                 state_flops_per_token=4.0 * heads * hdim * ns * len(kinds["M"]))
    counts = Counts(total=base + nm * e * expert, active=base + nm * k * expert, routed_expert_params=nm * e * expert,
                    attention_kind="Mamba-2 + GQA hybrid", checkpoint_quant=quant_method(c))
    moe: dict[str, Any] = dict(moe_num_experts=e, moe_experts_per_token=k,
                               moe_shared_experts=cfg.n_shared_experts if shared else 0,
                               moe_intermediate_size=cfg.moe_intermediate_size,
                               first_k_dense_layers=kinds["E"][0]) if nm else {}
    return to_model_arch(cfg, counts, "nemotron_h", name, source, hybrid=state, **moe)
