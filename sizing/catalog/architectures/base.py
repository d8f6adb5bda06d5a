"""What every architecture reader shares: the strict config schema, the one-line error, the
parameter-count pieces and the step from counts to a `ModelArch`.

Counts are exact parameter counts (not billions) of the checkpoint's tensors as the family's
modelling code defines them: projections, biases, norms, routers, embeddings. Units: parameters;
`ModelArch` (sizing/catalog/lookup.py) then holds billions (1e9).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

ArchFields = dict[str, Any]  # keyword arguments of sizing.catalog.lookup.ModelArch (built by the caller)

# bounds that no released decoder comes near; beyond them a value is a typo or junk, not a model
Dim = Annotated[int, Field(gt=0, le=1_048_576)]
Heads = Annotated[int, Field(gt=0, le=65_536)]
Layers = Annotated[int, Field(gt=0, le=100_000)]
Count = Annotated[int, Field(ge=0, le=1_000_000)]
Experts = Annotated[int, Field(gt=0, le=100_000)]  # experts per layer, or experts a token is routed to
Vocab = Annotated[int, Field(gt=0, le=100_000_000)]
Positions = Annotated[int, Field(gt=0, le=1_000_000_000)]


class ArchitectureError(ValueError):
    """A config.json that cannot be sized: unknown family, a missing field, an impossible value;
    one line naming the field. sizing.catalog.hf_config turns it into a CatalogLookupError (exit 2); the
    readers import nothing else of llmcap, so they add little to the import chains."""


class BaseConfig(BaseModel):
    """The fields every decoder-only config.json carries. Strict: a number must be a JSON integer
    (no strings, floats, booleans or 1e400), within the bounds above; unknown keys are ignored
    (configs carry dozens the sizing does not need)."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    model_type: str = Field(min_length=1, max_length=100)
    hidden_size: Dim
    num_hidden_layers: Layers
    num_attention_heads: Heads
    num_key_value_heads: Heads | None = None
    head_dim: Dim | None = None
    vocab_size: Vocab
    intermediate_size: Dim
    tie_word_embeddings: bool = False
    max_position_embeddings: Positions = 4096
    torch_dtype: str | None = Field(default=None, max_length=40)
    sliding_window: Annotated[int, Field(gt=0, le=1_000_000_000)] | None = None

    @model_validator(mode="after")
    def _kv_heads_divide(self) -> BaseConfig:
        if self.num_attention_heads % self.kv_heads:
            raise ValueError(f"num_key_value_heads: {self.kv_heads} does not divide num_attention_heads "
                             f"{self.num_attention_heads}")
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(f"head_dim: missing, and hidden_size {self.hidden_size} is not a multiple of "
                             f"num_attention_heads {self.num_attention_heads}")
        return self

    @property
    def kv_heads(self) -> int:
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def hd(self) -> int:
        """Head dimension: `head_dim`, else hidden_size / num_attention_heads."""
        return self.head_dim or self.hidden_size // self.num_attention_heads


C = TypeVar("C", bound=BaseConfig)


def parse(schema: type[C], c: dict[str, Any], name: str) -> C:
    """`c` validated against `schema`; the first problem as one line naming the field."""
    try:
        return schema.model_validate(c)
    except ValidationError as e:
        errs = e.errors()
        err = next((x for x in errs if x["type"] != "missing"), errs[0])  # a bad value before a missing one
        loc = ".".join(str(p) for p in err["loc"]) or "config"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = f"missing (the {c.get('model_type')} reader needs it)"
        elif "input" in err and err["type"] not in ("value_error",):
            msg = f"{msg} (got {str(err['input'])[:40]!r})"  # repr: a value with a newline stays one line
        raise ArchitectureError(" ".join(f"model config {name}: {loc}: {msg}".split("\n"))) from None


# --- parameter counts (exact tensors) -------------------------------------------------------

def gqa_attention(h: int, heads: int, kv: int, hd: int, qkv_bias: bool = False, o_bias: bool = False,
                  qk_norm: bool = False) -> int:
    """q, k, v and o projections of grouped-query attention (MHA when kv == heads)."""
    n = h * heads * hd + 2 * h * kv * hd + heads * hd * h
    if qkv_bias:
        n += heads * hd + 2 * kv * hd
    if o_bias:
        n += h
    if qk_norm:
        n += 2 * hd
    return n


def glu_mlp(h: int, inter: int) -> int:
    """Gated MLP (SwiGLU / GeGLU): gate, up and down projections, no bias."""
    return 3 * h * inter


def embeddings(vocab: int, h: int, tied: bool) -> int:
    """Input embedding plus lm_head (one matrix when tied)."""
    return vocab * h * (1 if tied else 2)


@dataclass(frozen=True)
class Counts:
    """What a reader derives from one config (parameters, not billions)."""

    total: int  # every parameter the engine loads by default (no MTP layers)
    active: int  # per token: both embedding matrices (this project's convention), attention, the
    #              dense MLPs, the routed experts a token visits and the shared experts
    routed_expert_params: int = 0  # all routed experts of all layers
    mtp_layers: int = 0
    mtp_params: int = 0  # in the checkpoint, loaded only when speculative decoding uses them
    attention_kind: str = "GQA"
    sliding_window: int | None = None
    sliding_window_layers: tuple[int, ...] = ()
    native_expert_format: str | None = None  # "mxfp4": the checkpoint's experts are MXFP4
    checkpoint_quant: str | None = None  # quantization_config.quant_method of the checkpoint
    notes: tuple[str, ...] = field(default_factory=tuple)


def quant_method(c: dict[str, Any]) -> str | None:
    q = c.get("quantization_config")
    if isinstance(q, dict) and isinstance(q.get("quant_method"), str):
        return str(q["quant_method"])[:40]
    return None


def layers_of_kind(layer_types: Any, n_layers: int, kind: str, name: str) -> tuple[int, ...]:
    """0-based indices of `layer_types` entries equal to `kind`; the list must have one entry per layer."""
    if not isinstance(layer_types, list) or len(layer_types) != n_layers or \
            not all(isinstance(t, str) for t in layer_types):
        raise ArchitectureError(f"model config {name}: layer_types: must list one attention type per layer "
                                f"({n_layers} strings)")
    return tuple(i for i, t in enumerate(layer_types) if t == kind)


def to_model_arch(cfg: BaseConfig, counts: Counts, family: str, name: str, source: str, *,
                  moe_num_experts: int | None = None, moe_experts_per_token: int | None = None,
                  moe_shared_experts: int | None = None, moe_intermediate_size: int | None = None,
                  first_k_dense_layers: int | None = None, head_dim: int | None = -1,
                  mla: tuple[int, int, int, int] | None = None,
                  sparse: tuple[int, int, int] | None = None,
                  hybrid: dict[str, Any] | None = None) -> ArchFields:
    """The fields of the catalog record (`ModelArch(**fields)`) for a derived architecture;
    `mla` = (kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim); `sparse` = DSA's
    (index_topk, index_n_heads, index_head_dim); `hybrid`: the ModelArch state fields (state_layers,
    no_cache_layers, state_conv_elems, state_ssm_elems, state_ssm_bytes, state_flops_per_token). The readers stay
    below sizing.catalog.lookup in the layers, so the caller builds the record."""
    return dict(
        hf_id=name, short_name=name.rstrip("/").split("/")[-1].lower(), family=family,
        params_total_b=counts.total / 1e9, params_active_b=counts.active / 1e9,
        num_layers=cfg.num_hidden_layers, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_attention_heads=cfg.num_attention_heads, num_kv_heads=cfg.kv_heads,
        head_dim=cfg.hd if head_dim == -1 else head_dim, vocab_size=cfg.vocab_size,
        tie_word_embeddings=cfg.tie_word_embeddings, max_position_embeddings=cfg.max_position_embeddings,
        attention_kind=counts.attention_kind, sliding_window=counts.sliding_window,
        sliding_window_layers=counts.sliding_window_layers,
        mla_kv_lora_rank=mla[0] if mla else None, mla_qk_rope_head_dim=mla[1] if mla else None,
        mla_qk_nope_head_dim=mla[2] if mla else None, mla_v_head_dim=mla[3] if mla else None,
        moe_num_experts=moe_num_experts, moe_experts_per_token=moe_experts_per_token,
        moe_shared_experts=moe_shared_experts, moe_intermediate_size=moe_intermediate_size,
        first_k_dense_layers=first_k_dense_layers, torch_dtype=cfg.torch_dtype, source=source,
        as_of=date.today().isoformat(), model_type=cfg.model_type,
        expert_params_b=counts.routed_expert_params / 1e9, native_expert_format=counts.native_expert_format,
        mtp_layers=counts.mtp_layers, mtp_params_b=counts.mtp_params / 1e9,
        checkpoint_quant=counts.checkpoint_quant,
        params_source="config.json tensor shapes",
        index_topk=sparse[0] if sparse else None, index_n_heads=sparse[1] if sparse else None,
        index_head_dim=sparse[2] if sparse else None, **(hybrid or {}))
