"""Roofline physics of one engine step on one model replica (tp × pp GPUs).

Owns: bytes moved, FLOPs and all-reduce traffic of a step that decodes `d` sequences and
prefills `p` prompt tokens, and the step time that follows from the GPU's datasheet peaks
times fitted efficiencies. No serving-level logic (queues, SLOs) lives here.

Units: seconds for times (callers convert to ms), bytes, FLOPs, bytes/s. Quantities named
`_per_gpu` are for one GPU of one pipeline stage; the replica runs `pp` stages one after the
other, each on micro-batches of batch / pp.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sizing.catalog import Catalog, Gpu, ModelArch, PrecisionFormat
from sizing.memory import (
    embedding_params,
    expert_weight_bytes_per_replica,
    kv_cache_bytes_per_sequence,
    kv_dtype_bytes,
    kv_replication_factor,
    weight_bytes_per_replica,
)
from sizing.perf_calibration import Calibration, PerfModelError, pcie_bandwidth_gbs

GB = 1e9
_PEAK_FIELD = {"fp8": "fp8_dense_tflops", "int8": "int8_dense_tops", "fp4": "fp4_dense_tflops",
               "bf16": "bf16_dense_tflops", "fp16": "fp16_dense_tflops"}


def compute_peak_tflops(cal: Calibration, gpu: Gpu, fmt: PrecisionFormat) -> tuple[float, bool]:
    """Dense tensor peak (TFLOPS per GPU) this precision runs at, and whether it is weight-only.

    A format computes natively only on its listed architectures (FP8 on Ada/Hopper/Blackwell);
    elsewhere, and for int4 AWQ/GPTQ everywhere, weights are dequantized and the math runs at
    16 bits. A GPU without a datasheet figure (the A10G) uses the effective figure fitted from
    measurements in perf_calibration.json; with neither, this raises rather than guess."""
    native = gpu.generation in fmt.native_activation_archs
    dtype = fmt.activation_dtype_native if native else "fp16"
    weight_only = not native and fmt.weight_bits < 16
    peak = getattr(gpu, _PEAK_FIELD.get(dtype, "fp16_dense_tflops"))
    if peak is None and dtype in ("bf16", "fp16"):
        peak = gpu.fp16_dense_tflops or gpu.bf16_dense_tflops
    if peak is None:
        peak = cal.fitted_compute_tflops.get(gpu.name)
    if peak is None:
        raise PerfModelError(f"GPU {gpu.name} has no {dtype} tensor-compute figure in gpus.csv and none fitted "
                             "from measurements; the performance model will not guess one")
    return float(peak), weight_only


def link_bandwidth_gbs(gpu: Gpu, interconnect: str) -> float:
    """Per-direction GB/s of one GPU's link: NVLink's datasheet figure is bidirectional, so halved."""
    if interconnect == "nvlink":
        if not gpu.nvlink_bandwidth_gbs:
            raise PerfModelError(f"GPU {gpu.name} has no NVLink bandwidth in gpus.csv")
        return gpu.nvlink_bandwidth_gbs / 2.0
    pcie = pcie_bandwidth_gbs().get(gpu.name)
    if pcie is None:
        raise PerfModelError(f"no PCIe bandwidth for GPU {gpu.name} in interconnects.csv")
    return pcie


def overlap(mem_s: float, comp_s: float, sharpness: float) -> float:
    """Soft roofline: (mem^a + comp^a)^(1/a). a → inf is max() (perfect overlap), a = 1 the sum;
    real kernels sit between, so `a` is fitted. Never below max(mem, comp)."""
    hi, lo = (mem_s, comp_s) if mem_s >= comp_s else (comp_s, mem_s)
    if hi <= 0.0:
        return 0.0
    return hi * (1.0 + (lo / hi) ** sharpness) ** (1.0 / sharpness)


@dataclass(frozen=True)
class StepModel:
    """Per-replica constants of the step-time model (see module docstring for units)."""

    tp: int
    pp: int
    dense_bytes_per_gpu: float  # weights read once per step, excluding experts and the input embedding
    expert_bytes_per_gpu: float  # one expert's weights over all MoE layers, this GPU's shard
    num_experts: int  # 0 for dense models
    experts_per_token: int
    kv_bytes_per_token_per_gpu: float
    kv_dtype_bytes: float
    flops_per_token_per_gpu: float  # 2 × active params / (tp·pp)
    attn_flops_per_ctx_token_per_gpu: float  # QK and AV per new token per cached token
    allreduces_per_stage: int
    allreduce_bytes_per_token: float
    bw_bytes_per_s: float  # effective
    compute_flops_per_s: float  # effective
    link_bytes_per_s: float  # effective, per direction
    allreduce_latency_s: float
    overhead_s: float
    overhead_per_seq_s: float  # scheduler/sampling cost per running sequence per step
    roofline_sharpness: float  # how well memory traffic and math overlap (inf = perfectly: max())
    weight_gib_per_gpu: float
    peak_bandwidth_gbs: float

    def kv_bytes_per_seq_per_gpu(self, model: ModelArch, ctx_tokens: float) -> float:
        return self.kv_bytes_per_token_per_gpu * ctx_tokens if not model.sliding_window else \
            kv_cache_bytes_per_sequence(model, int(ctx_tokens), self.kv_dtype_bytes) / (self.tp * self.pp)

    def weight_bytes_touched(self, tokens: float) -> float:
        """Weight bytes per GPU a step of `tokens` tokens reads: MoE reads only the experts its tokens
        route to, in expectation E·(1-(1-k/E)^tokens) distinct experts per layer."""
        if not self.num_experts:
            return self.dense_bytes_per_gpu
        e, k = self.num_experts, self.experts_per_token
        touched = e * (1.0 - (1.0 - k / e) ** max(tokens, 1.0))
        return self.dense_bytes_per_gpu + touched * self.expert_bytes_per_gpu

    def parts(self, decode_seqs: float, ctx_tokens: float, prefill_tokens: float = 0.0,
              prefill_ctx_tokens: float = 0.0, kv_read_bytes: float | None = None,
              n_steps: float = 1.0) -> tuple[float, float, float]:
        """(memory s, compute s, communication s) of one stage's work on one micro-batch, spread over
        `n_steps` engine steps (weights are read, and all-reduces launched, once per step)."""
        d, p = decode_seqs / self.pp, prefill_tokens / self.pp
        tokens = d + p
        kv = kv_read_bytes / self.pp if kv_read_bytes is not None else d * ctx_tokens * self.kv_bytes_per_token_per_gpu
        weights = n_steps * self.weight_bytes_touched(tokens / n_steps)
        mem = (weights + kv + p * self.kv_bytes_per_token_per_gpu) / self.bw_bytes_per_s
        flops = self.flops_per_token_per_gpu * tokens + self.attn_flops_per_ctx_token_per_gpu * (
            d * ctx_tokens + p * prefill_ctx_tokens)
        comp = flops / self.compute_flops_per_s
        comm = 0.0
        if self.tp > 1:
            ring = 2.0 * (self.tp - 1) / self.tp * tokens * self.allreduce_bytes_per_token / self.link_bytes_per_s
            # a ring all-reduce takes 2(tp-1) latency-bound hops plus its bytes over the link
            hops = 2.0 * (self.tp - 1)
            comm = self.allreduces_per_stage * (n_steps * hops * self.allreduce_latency_s + ring)
        return mem, comp, comm

    def step_s(self, decode_seqs: float, ctx_tokens: float, prefill_tokens: float = 0.0,
               prefill_ctx_tokens: float = 0.0, kv_read_bytes: float | None = None, n_steps: float = 1.0) -> float:
        """Wall time of `n_steps` engine steps for the whole replica (all pp stages), seconds."""
        mem, comp, comm = self.parts(decode_seqs, ctx_tokens, prefill_tokens, prefill_ctx_tokens, kv_read_bytes,
                                     n_steps)
        return self.pp * (overlap(mem, comp, self.roofline_sharpness) + comm
                          + n_steps * self.overhead_s + decode_seqs / self.pp * self.overhead_per_seq_s)


def build_step_model(catalog: Catalog, cal: Calibration, model: ModelArch, gpu_name: str, precision: str,
                     tp: int, pp: int, kv_cache_dtype: str, engine: str, interconnect: str) -> StepModel:
    """Precompute a replica's step-model constants from the catalog and the calibration."""
    gpu = catalog.gpu(gpu_name)
    fmt = catalog.precision(precision)
    n = tp * pp
    w_total = weight_bytes_per_replica(model, fmt)
    emb_in = model.vocab_size * model.hidden_size * 2.0 if not model.tie_word_embeddings else 0.0
    w_read = max(w_total - emb_in, 0.0)
    n_exp = model.moe_num_experts or 0
    k = model.moe_experts_per_token or 0
    expert_bytes = 0.0
    if n_exp and n_exp > k:
        expert_params = (model.params_total_b - model.params_active_b) * 1e9 / (n_exp - k)
        expert_bytes = expert_params * fmt.bytes_per_param
        if model.native_expert_format:  # gpt-oss: the experts stay MXFP4 whatever the precision
            expert_bytes = expert_weight_bytes_per_replica(model, fmt) / n_exp
    dense_bytes = max(w_read - n_exp * expert_bytes, 0.0)
    kvb = kv_dtype_bytes(kv_cache_dtype, fmt)
    rep = kv_replication_factor(model, tp)
    kv_tok = kv_cache_bytes_per_sequence(model, 1, kvb) * rep
    head_dim = model.head_dim or (model.mla_qk_nope_head_dim or 0) + (model.mla_qk_rope_head_dim or 0) \
        or model.hidden_size // model.num_attention_heads
    attn = 4.0 * model.num_layers * model.num_attention_heads * head_dim
    # the input embedding is a lookup, not a matmul; a tied lm_head still multiplies
    active_nonemb = max(model.params_active_b * 1e9 - (0.0 if model.tie_word_embeddings else
                                                        embedding_params(model) / 2), 0.0)
    peak_tflops, weight_only = compute_peak_tflops(cal, gpu, fmt)
    eng_eff = cal.engine_eff(engine)
    c_eff = cal.compute_eff(gpu.generation) * eng_eff * (cal.weight_only_compute_efficiency if weight_only else 1.0)
    bw_eff = min(cal.bw_eff(gpu.generation) * eng_eff, 1.0)
    link = link_bandwidth_gbs(gpu, interconnect) if tp > 1 else 1.0
    return StepModel(
        tp=tp, pp=pp, dense_bytes_per_gpu=dense_bytes / n, expert_bytes_per_gpu=expert_bytes / n,
        num_experts=n_exp, experts_per_token=k, kv_bytes_per_token_per_gpu=kv_tok / n, kv_dtype_bytes=kvb,
        flops_per_token_per_gpu=2.0 * active_nonemb / n, attn_flops_per_ctx_token_per_gpu=attn / n,
        allreduces_per_stage=int(math.ceil(2 * model.num_layers / pp)),
        allreduce_bytes_per_token=model.hidden_size * 2.0,
        bw_bytes_per_s=gpu.memory_bandwidth_gbs * GB * bw_eff,
        compute_flops_per_s=peak_tflops * 1e12 * min(c_eff, 1.0),
        link_bytes_per_s=link * GB * cal.interconnect_efficiency.get(interconnect, 1.0),
        allreduce_latency_s=cal.allreduce_latency_us.get(interconnect, 0.0) / 1e6,
        overhead_s=cal.overhead_s(engine), overhead_per_seq_s=cal.overhead_per_seq_s(engine),
        roofline_sharpness=cal.roofline_sharpness, weight_gib_per_gpu=w_total / n / 2**30,
        peak_bandwidth_gbs=gpu.memory_bandwidth_gbs)
