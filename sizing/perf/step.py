"""Roofline physics of one engine step on one model replica (tp × pp GPUs).

Owns: bytes moved, FLOPs and all-reduce traffic of a step that decodes `d` sequences and
prefills `p` prompt tokens, and the step time that follows from the GPU's datasheet peaks times
physically bounded, fitted efficiencies (sizing/catalog/calibration.py). No serving-level logic
(queues, SLOs) lives here.

Per operation: weight GEMMs read the dense weights plus the experts a batch routes to (MoE) at
the achievable memory bandwidth and compute at MFU × a per-kernel-family factor (FP8 W8A8,
Marlin W4A16, FP weight-only); attention reads the KV the batch actually attends over
(sliding-window layers at most their window; MLA its latent) and multiplies QK/AV (MLA absorbed:
2·(rank + rope) + 2·rank FLOPs per head per context token); every layer all-reduces twice over
tp GPUs (ring: 2(tp-1) hops of per-hop latency, plus the bytes at link bandwidth); then CPU time
(per step, per running sequence, and kernel launches when CUDA graphs are off) is added, or
hidden under the GPU work with asynchronous scheduling. Decode batches are padded up to the next
captured CUDA-graph size for compute.

Simulator entry point (a stable name and signature; a step-level scheduler calls it per step):
    engine_step_s(sm, decode_context_tokens, prefill_chunks) -> seconds
where `decode_context_tokens` lists, per decoding sequence, the tokens already in its context, and
`prefill_chunks` lists (new prompt tokens in this step, prompt tokens already cached before it).

Units: seconds for times (callers convert to ms), bytes, FLOPs, bytes/s. Quantities named
`_per_gpu` are for one GPU of one pipeline stage; the replica runs `pp` stages one after the
other, each on micro-batches of batch / pp.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.errors import PerfModelError
from sizing.perf.fabric import pipeline_bytes_per_token
from sizing.perf.memory import (
    dense_bytes_per_param,
    embedding_params,
    engine_expert_layout,
    engine_layout_extra_bytes_per_replica,
    expert_weight_bytes_per_replica,
    indexer_bytes_per_token_per_layer,
    kv_cache_bytes_per_token,
    kv_dtype_bytes,
    kv_replication_factor,
    state_bytes_per_sequence,
    weight_bytes_per_replica,
)

if TYPE_CHECKING:
    from sizing.catalog.calibration import Calibration
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import Gpu, ModelArch, PrecisionFormat

GB = 1e9
HBM_MIN_BANDWIDTH_GBS = 1000.0  # every HBM part in gpus.csv is ≥ 1,555 GB/s; every GDDR6 part ≤ 864 GB/s
_PEAK_FIELD = {"fp8": "fp8_dense_tflops", "int8": "int8_dense_tops", "fp4": "fp4_dense_tflops",
               "bf16": "bf16_dense_tflops", "fp16": "fp16_dense_tflops"}
# vLLM's default CUDA-graph capture sizes (vllm/config: [1, 2, 4] + range(8, 256, 8) + range(256, 513, 16));
# a decode batch runs the next captured size up.
GRAPH_SIZES = [1, 2, 4, *range(8, 256, 8), *range(256, 513, 16)]
# `--quantization awq` (not awq_marlin) dequantizes every quantized weight to 16 bits and runs a dense
# matmul from engines.csv `awq_unfused_dequantize_min_tokens` tokens a step (vLLM 256, SGLang 0; fewer:
# vLLM's fused awq_gemm, which reads the 4-bit weights). Bytes moved per quantized weight by one dequantize
# + matmul beyond reading the 4-bit weight: the 16-bit copy awq_dequantize writes and the matmul reads back.
AWQ_DEQUANTIZE_BYTES_PER_PARAM = 2.0 + 2.0


def graph_padded(batch: float) -> float:
    """The captured CUDA-graph batch size a decode batch of `batch` runs at (unchanged above 512)."""
    if batch <= 0 or batch > GRAPH_SIZES[-1]:
        return batch
    return float(GRAPH_SIZES[bisect.bisect_left(GRAPH_SIZES, math.ceil(batch - 1e-9))])


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


def kernel_efficiency(cal: Calibration, fmt: PrecisionFormat, weight_only: bool) -> float:
    """Multiplier on gemm_mfu for this precision's GEMM kernel family."""
    if weight_only:
        return cal.v("marlin_w4a16_efficiency") if fmt.name.startswith("int4") else cal.v("fp_weight_only_efficiency")
    if fmt.weight_bits < 16 and fmt.activation_dtype_native in ("fp8", "int8", "fp4"):
        return cal.v("fp8_w8a8_efficiency")
    return 1.0


def link_bandwidth_gbs(catalog: Catalog, gpu: Gpu, interconnect: str) -> float:
    """Per-direction GB/s of one GPU's link: NVLink's datasheet figure is bidirectional, so halved;
    PCIe from the catalog's interconnects.csv."""
    if interconnect == "nvlink":
        if not gpu.nvlink_bandwidth_gbs:
            raise PerfModelError(f"GPU {gpu.name} has no NVLink bandwidth in gpus.csv")
        return gpu.nvlink_bandwidth_gbs / 2.0
    link = catalog.interconnects.get(gpu.name)
    pcie = link.pcie_bandwidth_gbs_per_direction if link else None
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
    num_layers: int
    dense_bytes_per_gpu: float  # weights read once per step, excluding experts and the input embedding
    expert_bytes_per_gpu: float  # one expert's weights over all MoE layers, this GPU's shard
    num_experts: int  # 0 for dense models
    experts_per_token: int
    kv_bytes_per_token_per_gpu: float  # all layers, within any sliding window
    kv_full_fraction: float  # share of the per-token KV in full-attention layers (1 without sliding windows)
    sliding_window: float  # tokens (inf without)
    kv_dtype_bytes: float
    dense_flops_per_token_per_gpu: float  # 2 × non-expert active params / (tp·pp), lm_head included
    expert_flops_per_token_per_gpu: float  # 2 × active expert params / (tp·pp)
    attn_flops_per_ctx_token_per_gpu: float  # QK and AV per new token per context token
    allreduces_per_stage: int
    allreduce_bytes_per_token: float
    bw_bytes_per_s: float  # achievable
    dense_flops_per_s: float  # achievable, dense (non-expert) GEMMs
    attn_flops_per_s: float  # achievable, attention's QK and AV products (FlashAttention-style kernels)
    expert_flops_per_s: float  # achievable, grouped expert GEMMs
    link_bytes_per_s: float  # achievable, per direction
    hop_latency_s: float
    overhead_s: float  # CPU time per step
    overhead_per_seq_s: float  # scheduler/sampling cost per running sequence per step
    launch_s: float  # kernel-launch time per step without CUDA graphs (0 with them)
    async_scheduling: bool  # CPU work overlaps the GPU's
    cuda_graphs: bool
    roofline_sharpness: float
    weight_gib_per_gpu: float
    peak_bandwidth_gbs: float
    # unfused AWQ (`--quantization awq`): steps of at least this many tokens dequantize (None: never)
    dequantize_min_tokens: float | None = None
    dequantize_bytes_per_gpu: float = 0.0  # the 16-bit copy written and read back per such step
    dequantized_flops_per_s: float = 0.0  # its matmul runs as a 16-bit dense GEMM
    # the lm_head's share of dense_flops_per_token_per_gpu: logits are computed only for the positions that
    # sample (each decode token; a prompt's last), never for the other prompt tokens (vLLM V1
    # gpu_model_runner: `sample_hidden_states = hidden_states[logits_indices]`, then compute_logits on them)
    lm_head_flops_per_token_per_gpu: float = 0.0
    # DeepSeek sparse attention (ModelArch.index_topk): attention reads at most `attn_topk` keys per query;
    # the indexer reads its key cache (`indexer_fraction` of kv_bytes_per_token_per_gpu) over the whole
    # context and scores every cached token at indexer_flops_per_ctx_token_per_gpu (the attention rate)
    attn_topk: float = math.inf
    indexer_fraction: float = 0.0
    indexer_flops_per_ctx_token_per_gpu: float = 0.0
    # a multi-node replica (one pipeline stage per node): each step sends every token's intermediate tensors
    # across the pp - 1 stage boundaries over the inter-node fabric (sizing/perf/fabric.py), bytes/s per node
    pipeline_bytes_per_token: float = 0.0
    fabric_bytes_per_s: float = math.inf
    # hybrid linear attention (ModelArch.state_layers): every step a sequence decodes or prefills in reads its
    # constant-size state and writes it back (the hybrid section of sizing.perf.memory), whatever its context
    state_bytes_per_seq_per_gpu: float = 0.0
    # a prompt token's QK and AV FLOPs per context token when its form differs from decode's (dense MLA
    # prefills in the MHA form, decodes absorbed: `_attn_flops_per_ctx_token`); None: the same
    attn_prefill_flops_per_ctx_token_per_gpu: float | None = None
    # an early engine's kernel-count-bound layer (sizing/data/engine_kernels.csv, counted in its code): each of
    # the layer's kernels costs `graph_kernel_us` of GPU time per step whatever its work (launch gap plus
    # shortest run), per pipeline stage, with or without CUDA graphs; 0 where the table counts nothing
    kernel_floor_s: float = 0.0
    # the largest decode batch the engine runs in a captured CUDA graph (sizing/data/engine_cuda_graphs.csv:
    # SGLang's cuda_graph_max_bs by GPU memory and TP; inf where not listed): a pure-decode step of more
    # sequences runs eagerly and pays `eager_launch_s`, the launches of --enforce-eager (eager_launch_us_per_layer
    # per layer per stage). Prefill steps are not charged: SGLang runs extend batches eagerly too, but their
    # prompt GEMMs are long enough that the launches queue ahead of them
    graph_max_batch: float = math.inf
    eager_launch_s: float = 0.0
    # speculative decoding (sizing.perf.spec_decode): every decoding sequence verifies `spec_tokens` + 1 tokens a
    # step, the draft (one decoder layer + the LM head) runs once over the step's tokens and `spec_draft_passes`
    # more times over one token per sequence, and a step yields `spec_accept_len` tokens per sequence on average
    spec_tokens: int = 0
    spec_accept_len: float = 1.0
    spec_draft_passes: int = 0
    lm_head_bytes_per_gpu: float = 0.0  # the LM head's weights (the draft's, shared with the target's)

    @property
    def flops_per_token_per_gpu(self) -> float:
        return self.dense_flops_per_token_per_gpu + self.expert_flops_per_token_per_gpu

    def kv_read_bytes(self, ctx_tokens: float) -> float:
        """KV bytes per GPU one sequence with `ctx_tokens` of context reads in one decode step (a hybrid
        model's state read and written back included)."""
        state = 2.0 * self.state_bytes_per_seq_per_gpu
        if self.attn_topk < math.inf:  # DSA: the top-k keys' KV, and the indexer's keys of the whole context
            return self.kv_bytes_per_token_per_gpu * ((1 - self.indexer_fraction) * self.attended(ctx_tokens)
                                                      + self.indexer_fraction * ctx_tokens) + state
        full = self.kv_full_fraction * ctx_tokens
        return self.kv_bytes_per_token_per_gpu * (full + (1 - self.kv_full_fraction) * min(ctx_tokens,
                                                                                           self.sliding_window)) \
            + state

    def attended(self, ctx_tokens: float) -> float:
        """Keys one query attends over with `ctx_tokens` of context: its window on sliding layers,
        at most attn_topk under DSA (a layer-weighted mean)."""
        f = self.kv_full_fraction
        return f * min(ctx_tokens, self.attn_topk) + (1 - f) * min(ctx_tokens, self.sliding_window)

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
              n_steps: float = 1.0, decode_query: float = 1.0) -> tuple[float, float, float]:
        """(memory s, compute s, communication s) of one stage's work on one micro-batch, spread over
        `n_steps` engine steps (weights are read, and all-reduces launched, once per step).
        `ctx_tokens`: mean context of a decoding sequence; `prefill_ctx_tokens`: mean context a
        prefill token attends over; `kv_read_bytes`: KV bytes per GPU the decodes read (None: from
        ctx_tokens); `decode_query`: tokens each decoding sequence runs (1; speculative verification
        k + 1: every one through the GEMMs and the LM head, attending over the same context, whose KV
        is read once)."""
        d, p = decode_seqs / self.pp, prefill_tokens / self.pp
        kv = kv_read_bytes / self.pp if kv_read_bytes is not None else d * self.kv_read_bytes(ctx_tokens)
        d *= decode_query
        tokens = d + p
        weights = n_steps * self.weight_bytes_touched(tokens / n_steps)
        dense_rate = self.dense_flops_per_s
        if self.dequantize_min_tokens is not None and tokens / n_steps >= self.dequantize_min_tokens:
            weights += n_steps * self.dequantize_bytes_per_gpu
            dense_rate = self.dequantized_flops_per_s
        mem = (weights + kv + p * self.kv_bytes_per_token_per_gpu) / self.bw_bytes_per_s
        # a pure-decode step runs at its CUDA-graph size
        gemm_tokens = graph_padded(d) + p if (self.cuda_graphs and p == 0 and n_steps == 1.0) else tokens
        f = self.kv_full_fraction
        if self.attn_topk < math.inf:
            attn_ctx = d * self.attended(ctx_tokens) + p * min(prefill_ctx_tokens, self.attn_topk)
            attn_ctx += (d * ctx_tokens + p * prefill_ctx_tokens) * self.indexer_flops_per_ctx_token_per_gpu \
                / self.attn_flops_per_ctx_token_per_gpu
        else:
            attn_ctx = d * (f * ctx_tokens + (1 - f) * min(ctx_tokens, self.sliding_window))
            pre = self.attn_prefill_flops_per_ctx_token_per_gpu
            # prompt tokens in their own attention form (dense MLA: the MHA form), as decode-form context
            attn_ctx += p * prefill_ctx_tokens * (1.0 if pre is None else pre / self.attn_flops_per_ctx_token_per_gpu)
        # prompt tokens run every dense GEMM but the lm_head
        comp = (self.dense_flops_per_token_per_gpu * gemm_tokens - self.lm_head_flops_per_token_per_gpu * p) \
            / dense_rate \
            + self.attn_flops_per_ctx_token_per_gpu * attn_ctx / self.attn_flops_per_s \
            + self.expert_flops_per_token_per_gpu * gemm_tokens / self.expert_flops_per_s
        comm = 0.0
        if self.tp > 1:
            ring = 2.0 * (self.tp - 1) / self.tp * tokens * self.allreduce_bytes_per_token / self.link_bytes_per_s
            # a ring all-reduce takes 2(tp-1) latency-bound hops plus its bytes over the link
            hops = 2.0 * (self.tp - 1)
            comm = self.allreduces_per_stage * (n_steps * hops * self.hop_latency_s + ring)
        return mem, comp, comm

    def gpu_s(self, decode_seqs: float, ctx_tokens: float, prefill_tokens: float = 0.0,
              prefill_ctx_tokens: float = 0.0, kv_read_bytes: float | None = None, n_steps: float = 1.0,
              decode_query: float = 1.0) -> float:
        """GPU time of `n_steps` steps, whole replica (all pp stages), seconds: the roofline bound."""
        mem, comp, comm = self.parts(decode_seqs, ctx_tokens, prefill_tokens, prefill_ctx_tokens, kv_read_bytes,
                                     n_steps, decode_query)
        return self.pp * (overlap(mem, comp, self.roofline_sharpness) + comm
                          + n_steps * (self.step_launch_s(decode_seqs / n_steps, prefill_tokens)
                                       + self.kernel_floor_s)) \
            + self.inter_node_s(decode_seqs + prefill_tokens)

    def step_launch_s(self, decode_batch: float, prefill_tokens: float) -> float:
        """Kernel-launch seconds per stage of one step decoding `decode_batch` sequences: launch_s without
        CUDA graphs; with them, eager_launch_s for a pure-decode batch above graph_max_batch (SGLang
        model_executor/cuda_graph_runner.py CudaGraphRunner.can_run: 'is_bs_supported = ... cuda_graph_bs <=
        self.max_bs'; otherwise model_runner.forward_decode runs without the graph), else 0."""
        if not self.cuda_graphs:
            return self.launch_s
        return self.eager_launch_s if prefill_tokens == 0 and decode_batch > self.graph_max_batch else 0.0

    def inter_node_s(self, tokens: float) -> float:
        """Seconds the step's `tokens` spend crossing the pp - 1 node boundaries (0 on one node)."""
        if self.pipeline_bytes_per_token == 0.0:
            return 0.0
        return (self.pp - 1) * tokens * self.pipeline_bytes_per_token / self.fabric_bytes_per_s

    def step_s(self, decode_seqs: float, ctx_tokens: float, prefill_tokens: float = 0.0,
               prefill_ctx_tokens: float = 0.0, kv_read_bytes: float | None = None, n_steps: float = 1.0) -> float:
        """Wall time of `n_steps` engine steps for the whole replica (all pp stages), seconds. With
        speculative decoding and sequences decoding, the time per token each sequence advances: one
        step verifies k + 1 tokens per sequence, runs the draft, and yields spec_accept_len tokens, so a
        token's share is the step's time / spec_accept_len (the prompt tokens it carries scaled alike)."""
        if self.spec_tokens and decode_seqs > 0:  # the prompt tokens that arrive while a sequence advances acc tokens
            acc = self.spec_accept_len
            return self.wall_step_s(decode_seqs, ctx_tokens, prefill_tokens * acc, prefill_ctx_tokens, kv_read_bytes,
                                    n_steps) / acc
        return self.wall_step_s(decode_seqs, ctx_tokens, prefill_tokens, prefill_ctx_tokens, kv_read_bytes, n_steps)

    def wall_step_s(self, decode_seqs: float, ctx_tokens: float, prefill_tokens: float = 0.0,
                    prefill_ctx_tokens: float = 0.0, kv_read_bytes: float | None = None,
                    n_steps: float = 1.0) -> float:
        """Wall time of `n_steps` engine steps carrying these prompt tokens, seconds: what a prompt whose
        chunks they are waits (its TTFT). Without speculative decoding the same as step_s; with it, each
        step verifies k + 1 tokens per decoding sequence and runs the draft, whatever it yields."""
        if self.spec_tokens:
            return self._spec_wall_s(decode_seqs, ctx_tokens, prefill_tokens, prefill_ctx_tokens, kv_read_bytes,
                                     n_steps)
        gpu = self.gpu_s(decode_seqs, ctx_tokens, prefill_tokens, prefill_ctx_tokens, kv_read_bytes, n_steps)
        cpu = n_steps * self.overhead_s + decode_seqs * self.overhead_per_seq_s
        return max(gpu, cpu) if self.async_scheduling else gpu + cpu

    def draft_pass_s(self, tokens: float, sampled: float, decode_seqs: float, ctx_tokens: float) -> float:
        """GPU seconds of one pass of the draft (one decoder layer of this model's shape: an EAGLE head or
        the MTP layer, plus the LM head on the `sampled` positions) over `tokens` tokens, `decode_seqs`
        sequences attending over `ctx_tokens` each; its all-reduces as one layer's."""
        per_layer = 1.0 / self.num_layers
        w = (self.weight_bytes_touched(tokens) - self.lm_head_bytes_per_gpu) * per_layer + self.lm_head_bytes_per_gpu
        mem = (w + decode_seqs * self.kv_read_bytes(ctx_tokens) * per_layer) / self.bw_bytes_per_s
        lm = self.lm_head_flops_per_token_per_gpu
        dense = (self.dense_flops_per_token_per_gpu - lm) * tokens * per_layer + lm * sampled
        comp = dense / self.dense_flops_per_s \
            + self.expert_flops_per_token_per_gpu * tokens * per_layer / self.expert_flops_per_s \
            + self.attn_flops_per_ctx_token_per_gpu * tokens * per_layer * self.attended(ctx_tokens) \
            / self.attn_flops_per_s
        comm = 0.0
        if self.tp > 1:
            ring = 2.0 * (self.tp - 1) / self.tp * tokens * self.allreduce_bytes_per_token / self.link_bytes_per_s
            comm = 2.0 * (2.0 * (self.tp - 1) * self.hop_latency_s + ring)
        return overlap(mem, comp, self.roofline_sharpness) + comm + self.kernel_floor_s * self.pp * per_layer

    def _spec_wall_s(self, decode_seqs: float, ctx_tokens: float, p: float,
                     prefill_ctx_tokens: float, kv_read_bytes: float | None, n_steps: float) -> float:
        """Wall seconds of `n_steps` speculative steps carrying `p` prompt tokens (the draft's first pass runs
        over them too, sampling one position per sequence)."""
        q = self.spec_tokens + 1.0
        verify = self.gpu_s(decode_seqs, ctx_tokens, p, prefill_ctx_tokens, kv_read_bytes, n_steps, q)
        draft = n_steps * self.draft_pass_s(decode_seqs * q + p / n_steps, max(decode_seqs, 1.0), decode_seqs,
                                            ctx_tokens) \
            + n_steps * self.spec_draft_passes * self.draft_pass_s(decode_seqs, decode_seqs, decode_seqs, ctx_tokens)
        cpu = n_steps * self.overhead_s + decode_seqs * self.overhead_per_seq_s
        return max(verify + draft, cpu) if self.async_scheduling else verify + draft + cpu


def engine_step_s(sm: StepModel, decode_context_tokens: Sequence[float],
                  prefill_chunks: Sequence[tuple[float, float]] = ()) -> float:
    """Wall time in seconds of ONE engine step of the whole replica (the simulator's entry point).

    decode_context_tokens: for each sequence decoding one token in this step, the tokens already in
        its context (prompt + generated so far).
    prefill_chunks: for each prompt chunk scheduled in this step, (new tokens prefilled now, tokens of
        the same prompt already in the KV cache: earlier chunks or prefix-cache hits).
    Same physics as StepModel.step_s (which the analytic model uses with means)."""
    d = float(len(decode_context_tokens))
    kv = sum(sm.kv_read_bytes(c) for c in decode_context_tokens)
    ctx_mean = sum(decode_context_tokens) / d if d else 0.0
    p = float(sum(n for n, _ in prefill_chunks))
    # a chunk of n tokens after c cached attends over c + n/2 tokens on average, and reads the c cached
    pctx = sum(n * (c + n / 2.0) for n, c in prefill_chunks) / p if p else 0.0
    kv += sum(sm.kv_read_bytes(c) for n, c in prefill_chunks if n > 0)
    return sm.step_s(d, ctx_mean, p, pctx, kv_read_bytes=kv)


def _attn_flops_per_ctx_token(model: ModelArch, prefill: bool = False) -> float:
    """FLOPs per new token per context token over all layers (2 per multiply-add, QK and AV).

    MLA runs two forms. Decode: the absorbed, data-movement friendly one, scores over the latent rank +
    rope dims and values in the latent rank. Prefill (`prefill` True) of dense MLA: the compute friendly
    MHA one, q/k heads of nope + rope dims and v heads of v_head_dim, 3.4x fewer FLOPs for DeepSeek-V3
    (vLLM `vllm/attention/backends/mla/common.py`: 'Compute Friendly Approach (i.e. "_forward_prefill")
    ... MHA with QK headdim = P + R, V headdim = V' and 'Data-Movement Friendly Approach (i.e.
    "_forward_decode")'; SGLang 0.4.3 `DeepseekV2AttentionMLA.forward`: `forward_normal` for an extend
    without a cached prefix). DeepSeek sparse attention stays absorbed in both (vLLM FlashMLASparseImpl
    attends `torch.cat([ql_nope, q_pe])` over the latent cache)."""
    if model.is_mla:
        r, rope = model.mla_kv_lora_rank or 0, model.mla_qk_rope_head_dim or 0
        nope, v = model.mla_qk_nope_head_dim, model.mla_v_head_dim
        if prefill and model.index_topk is None and nope and v:
            return 2.0 * model.num_layers * model.num_attention_heads * ((nope + rope) + v)
        return 2.0 * model.num_layers * model.num_attention_heads * ((r + rope) + r)
    head_dim = model.head_dim or model.hidden_size // model.num_attention_heads
    return 4.0 * model.kv_layers * model.num_attention_heads * head_dim  # hybrid: its full-attention layers


def build_step_model(catalog: Catalog, cal: Calibration, model: ModelArch, gpu_name: str, precision: str,
                     tp: int, pp: int, kv_cache_dtype: str, engine: str, interconnect: str,
                     cuda_graphs: bool = True, async_scheduling: bool = False,
                     awq_marlin: bool = True, fabric_gbps: float | None = None,
                     kernels_per_layer: int = 0, spec_tokens: int = 0, spec_accept_len: float = 1.0,
                     spec_draft_passes: int = 0, graph_max_batch: float = math.inf) -> StepModel:
    """Precompute a replica's step-model constants from the catalog and the calibration.
    `fabric_gbps`: Gbit/s per node between the pipeline stages of a multi-node replica (None: one node).
    `awq_marlin` False: an AWQ checkpoint on the unfused kernels (engines.csv
    `awq_unfused_dequantize_min_tokens`). An engine engines.csv does not list (tgi, calibration only)
    has neither kernel rule. `kernels_per_layer`: the kernels each layer launches per step where
    engine_kernels.csv counts them for the engine's version (Catalog.engine_kernels_per_layer; 0: not a term).
    `spec_tokens` k > 0: speculative decoding (sizing.perf.spec_decode: k drafted tokens per sequence, a step
    yielding `spec_accept_len` tokens, `spec_draft_passes` draft passes after the first). `graph_max_batch`: the
    largest decode batch run in a CUDA graph (Catalog.cuda_graph_max_batch; inf: every decode batch)."""
    gpu = catalog.gpu(gpu_name)
    fmt = catalog.precision(precision)
    n = tp * pp
    w_total = weight_bytes_per_replica(model, fmt)
    emb_in = model.vocab_size * model.hidden_size * 2.0 if not model.tie_word_embeddings else 0.0
    w_read = max(w_total - emb_in, 0.0)
    n_exp = model.moe_num_experts or 0
    k = model.moe_experts_per_token or 0
    expert_bytes = expert_params = 0.0
    if n_exp and n_exp > k:
        expert_params = (model.params_total_b - model.params_active_b) * 1e9 / (n_exp - k)
        expert_bytes = expert_params * fmt.bytes_per_param
        if model.native_expert_format:  # gpt-oss: the experts stay MXFP4 whatever the precision
            expert_bytes = expert_weight_bytes_per_replica(model, fmt) / n_exp
    dense_bytes = max(w_read - n_exp * expert_bytes, 0.0)
    # the engine's expert layout (vLLM pads MXFP4 experts per backend): every step reads the padded shard
    expert_bytes *= engine_expert_layout(model, fmt, engine, gpu.generation, tp)[0]
    w_total += engine_layout_extra_bytes_per_replica(model, fmt, engine, gpu.generation, tp)
    kvb = kv_dtype_bytes(kv_cache_dtype, fmt)
    rep = kv_replication_factor(model, tp)
    kv_tok = kv_cache_bytes_per_token(model, kvb) * rep
    n_window = len(model.sliding_window_layers) if model.sliding_window else 0
    # the input embedding is a lookup, not a matmul; a tied lm_head still multiplies
    active_nonemb = max(model.params_active_b * 1e9 - (0.0 if model.tie_word_embeddings else
                                                        embedding_params(model) / 2), 0.0)
    active_expert = min(k * expert_params, active_nonemb)
    peak_tflops, weight_only = compute_peak_tflops(cal, gpu, fmt)
    mfu = min(cal.v("gemm_mfu") * cal.engine_eff(engine) * kernel_efficiency(cal, fmt, weight_only), 1.0)
    # this engine's 16-bit dense GEMM rate: attention (16-bit Q/K/V; an FP8 KV cache is dequantized in the
    # kernel), the 16-bit layers of a natively quantized-expert checkpoint, the matmul after an unfused AWQ
    # dequantize, and FP8 experts on the Triton fused-MoE kernel all run at it
    peak16_tflops, _ = compute_peak_tflops(cal, gpu, catalog.precision("bf16"))
    rate16 = peak16_tflops * 1e12 * min(cal.v("gemm_mfu") * cal.engine_eff(engine), 1.0)
    # the non-expert GEMMs of a natively quantized-expert checkpoint (gpt-oss) are 16-bit
    # (memory.dense_bytes_per_param), not at the experts' kernel
    dense16 = dense_bytes_per_param(model, fmt) == 2.0 and fmt.bytes_per_param != 2.0
    # a narrow per-GPU shard of each expert's intermediate dimension (tensor parallel) wastes tiles
    width = (model.moe_intermediate_size or model.intermediate_size or model.hidden_size) / tp
    shard_eff = width / (width + cal.v("expert_shard_width_half")) if n_exp else 1.0
    rules = catalog.engines.get(engine)
    # FP8 W8A8 experts on a Triton fused-MoE kernel (engines.csv `fp8_moe_experts_at_16_bit_rate`, with its
    # source): FP8 still halves the expert bytes read, the math runs at the 16-bit rate
    triton_fp8_experts = (n_exp and rules is not None and rules.fp8_moe_experts_at_16_bit_rate and not weight_only
                          and fmt.weight_bits < 16 and fmt.activation_dtype_native == "fp8")
    expert_flops_per_s = (rate16 if triton_fp8_experts else peak_tflops * 1e12 * mfu) \
        * cal.v("moe_expert_efficiency") * shard_eff
    hbm = gpu.memory_bandwidth_gbs >= HBM_MIN_BANDWIDTH_GBS
    dequant_min = (rules.awq_unfused_dequantize_min_tokens
                   if rules is not None and not awq_marlin and fmt.name == "int4-awq" else None)
    # the quantized weights: everything but the 16-bit embeddings / lm_head
    quantized_params = model.params_total_b * 1e9 - (0.0 if fmt.quantizes_embeddings else embedding_params(model))
    link = link_bandwidth_gbs(catalog, gpu, interconnect) if tp > 1 else 1.0
    return StepModel(
        tp=tp, pp=pp, num_layers=model.num_layers, dense_bytes_per_gpu=dense_bytes / n,
        expert_bytes_per_gpu=expert_bytes / n, num_experts=n_exp, experts_per_token=k,
        kv_bytes_per_token_per_gpu=kv_tok / n, kv_full_fraction=1.0 - n_window / model.num_layers,
        sliding_window=float(model.sliding_window) if model.sliding_window else math.inf, kv_dtype_bytes=kvb,
        # a hybrid's recurrence (ModelArch.state_flops_per_token) is per token like a GEMM's work
        dense_flops_per_token_per_gpu=(2.0 * (active_nonemb - active_expert) + model.state_flops_per_token) / n,
        lm_head_flops_per_token_per_gpu=2.0 * model.vocab_size * model.hidden_size / n,
        expert_flops_per_token_per_gpu=2.0 * active_expert / n,
        attn_flops_per_ctx_token_per_gpu=_attn_flops_per_ctx_token(model) / n,
        attn_prefill_flops_per_ctx_token_per_gpu=_attn_flops_per_ctx_token(model, prefill=True) / n,
        allreduces_per_stage=int(math.ceil(2 * model.num_layers / pp)),
        allreduce_bytes_per_token=model.hidden_size * 2.0,
        bw_bytes_per_s=gpu.memory_bandwidth_gbs * GB * cal.bandwidth_fraction(hbm),
        dense_flops_per_s=rate16 if dense16 else peak_tflops * 1e12 * mfu,
        attn_flops_per_s=rate16 * cal.v("attention_efficiency"),
        expert_flops_per_s=expert_flops_per_s,
        link_bytes_per_s=link * GB * cal.link_efficiency(interconnect),
        hop_latency_s=cal.hop_latency_s(interconnect),
        overhead_s=cal.overhead_s(engine), overhead_per_seq_s=cal.overhead_per_seq_s(engine),
        launch_s=0.0 if cuda_graphs else cal.v("eager_launch_us_per_layer") * model.num_layers / pp / 1e6,
        eager_launch_s=cal.v("eager_launch_us_per_layer") * model.num_layers / pp / 1e6,
        graph_max_batch=graph_max_batch,
        async_scheduling=async_scheduling, cuda_graphs=cuda_graphs,
        roofline_sharpness=cal.v("roofline_sharpness"), weight_gib_per_gpu=w_total / n / 2**30,
        peak_bandwidth_gbs=gpu.memory_bandwidth_gbs, dequantize_min_tokens=dequant_min,
        dequantize_bytes_per_gpu=max(quantized_params, 0.0) * AWQ_DEQUANTIZE_BYTES_PER_PARAM / n,
        dequantized_flops_per_s=rate16,
        # DSA (DeepSeek-V3.2-Exp inference/model.py): attention over min(index_topk, context) keys; the
        # indexer's FP8 keys of every cached token are read and scored (index_n_heads x index_head_dim
        # multiply-adds per layer per context token)
        pipeline_bytes_per_token=pipeline_bytes_per_token(model) if fabric_gbps and pp > 1 else 0.0,
        fabric_bytes_per_s=fabric_gbps * GB / 8.0 if fabric_gbps and pp > 1 else math.inf,
        attn_topk=float(model.index_topk) if model.index_topk else math.inf,
        indexer_fraction=indexer_bytes_per_token_per_layer(model) * model.num_layers * rep / kv_tok
        if model.index_topk else 0.0,
        indexer_flops_per_ctx_token_per_gpu=2.0 * model.num_layers * (model.index_n_heads or 0)
        * (model.index_head_dim or 0) / n if model.index_topk else 0.0,
        state_bytes_per_seq_per_gpu=state_bytes_per_sequence(model) / n,
        kernel_floor_s=kernels_per_layer * model.num_layers / pp * cal.v("graph_kernel_us") / 1e6,
        spec_tokens=spec_tokens, spec_accept_len=spec_accept_len if spec_tokens else 1.0,
        spec_draft_passes=spec_draft_passes,
        lm_head_bytes_per_gpu=model.vocab_size * model.hidden_size
        * (fmt.bytes_per_param if fmt.quantizes_embeddings else 2.0) / n)
