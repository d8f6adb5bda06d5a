"""The catalog's typed records (a GPU, an instance type, a price, a model architecture, an API price,
a platform price, a precision format, an engine's defaults; the platform's settings, CPU instance
types, system pods, node DaemonSets, PCIe links, pinned checkpoints, quota families, EC2 GPU names,
hosted-API models) and the parsing of one CSV row into one. Units are in the field names (GB/s,
TFLOPS, GiB, USD per hour, USD per 1M tokens)."""

from __future__ import annotations

from dataclasses import dataclass


def opt_float(v: str) -> float | None:
    v = (v or "").strip()
    return float(v) if v else None


def opt_int(v: str) -> int | None:
    v = (v or "").strip()
    return int(float(v)) if v else None


def flag(v: str) -> bool:
    return (v or "").strip().lower() in ("yes", "true", "1")


@dataclass(frozen=True)
class Gpu:
    """One GPU model's datasheet figures. Throughputs are dense (no sparsity), per GPU."""

    name: str
    architecture: str
    memory_gib: float
    memory_bandwidth_gbs: float
    bf16_dense_tflops: float | None
    fp16_dense_tflops: float | None
    fp8_dense_tflops: float | None
    fp4_dense_tflops: float | None
    int8_dense_tops: float | None
    fp8_supported: bool
    bf16_supported: bool
    nvlink_bandwidth_gbs: float | None
    tdp_w: float | None
    source: str
    as_of: str

    @property
    def generation(self) -> str:
        """Ampere, Ada, Hopper, Blackwell or Turing: the key for fitted efficiencies."""
        for g in ("Ampere", "Ada", "Hopper", "Blackwell", "Turing"):
            if self.architecture.lower().startswith(g.lower()):
                return g
        return self.architecture.split()[0]


@dataclass(frozen=True)
class Instance:
    """One EC2 instance size. `gpu_count` may be fractional (g6f: a slice of one L4)."""

    instance_type: str
    family: str
    gpu: str
    gpu_count: float
    gpu_memory_gib_each: float
    vcpus: int
    memory_gib: float
    local_nvme_gb: int
    network_gbps: float | None
    efa: bool
    gpu_interconnect: str  # "nvlink" or "pcie"
    source: str
    as_of: str

    @property
    def is_fractional(self) -> bool:
        return self.gpu_count < 1

    @property
    def whole_gpus(self) -> int:
        return int(self.gpu_count) if self.gpu_count >= 1 else 0

    @property
    def is_p_family(self) -> bool:
        return self.family.startswith("p")


@dataclass(frozen=True)
class Price:
    instance_type: str
    region: str
    purchase: str  # on-demand | spot
    usd_per_hour: float
    source: str
    as_of: str


@dataclass(frozen=True)
class ModelArch:
    """Architecture facts of one model (from its Hugging Face config.json).

    Parameter counts are in billions (1e9). `head_dim` is None for MLA models.
    `sliding_window_layers` are 0-based indices of layers that use the window.
    """

    hf_id: str
    short_name: str
    family: str
    params_total_b: float
    params_active_b: float
    num_layers: int
    hidden_size: int
    intermediate_size: int | None
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int | None
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    attention_kind: str
    sliding_window: int | None = None
    sliding_window_layers: tuple[int, ...] = ()
    mla_kv_lora_rank: int | None = None
    mla_qk_rope_head_dim: int | None = None
    mla_qk_nope_head_dim: int | None = None
    mla_v_head_dim: int | None = None
    moe_num_experts: int | None = None
    moe_experts_per_token: int | None = None
    moe_shared_experts: int | None = None
    moe_intermediate_size: int | None = None
    first_k_dense_layers: int | None = None
    torch_dtype: str | None = None
    source: str = ""
    as_of: str = ""
    # filled by the architecture readers (sizing/catalog/architectures/) for configs and catalog rows alike
    model_type: str = ""  # the config's model_type (llama, deepseek_v3, gpt_oss, ...)
    expert_params_b: float | None = None  # all routed experts of all layers, billions
    native_expert_format: str | None = None  # "mxfp4": the published checkpoint stores experts in MXFP4
    mtp_layers: int = 0  # multi-token-prediction layers in the checkpoint (num_nextn_predict_layers)
    mtp_params_b: float = 0.0  # their parameters, billions, NOT in params_total_b (loaded only for MTP drafts)
    checkpoint_quant: str | None = None  # quantization_config.quant_method of the published checkpoint
    params_source: str = "model card"  # where params_total_b comes from (shown in the plan's assumptions)
    # DeepSeek sparse attention (DSA, `deepseek_v32`): a lightning indexer of `index_n_heads` heads of
    # `index_head_dim` scores every cached token, and attention reads only the `index_topk` best
    # (DeepSeek-V3.2-Exp inference/model.py Indexer.forward: `index_score.topk(min(self.index_topk,
    # end_pos))`). None: dense attention.
    index_topk: int | None = None
    index_n_heads: int | None = None
    index_head_dim: int | None = None
    # hybrid linear attention (sizing/catalog/architectures/hybrid.py): 0-based indices of the layers that
    # keep a constant-size state per sequence instead of a KV cache (Qwen3-Next / Qwen3.5 gated delta-net,
    # Nemotron-H Mamba-2), and of the layers with neither (Nemotron-H's MLP / MoE-only blocks). Per state
    # layer and sequence, whole replica: `state_conv_elems` conv-state elements (conv_dim x (kernel - 1),
    # the model's dtype) and `state_ssm_elems` recurrent-state elements (heads x head_dim x state),
    # `state_ssm_bytes` bytes each (float32 where the config or the engine pins it); `state_flops_per_token`:
    # the recurrence's FLOPs per token over all state layers
    state_layers: tuple[int, ...] = ()
    no_cache_layers: tuple[int, ...] = ()
    state_conv_elems: int = 0
    state_ssm_elems: int = 0
    state_ssm_bytes: float = 0.0
    state_flops_per_token: float = 0.0

    @property
    def is_hybrid(self) -> bool:
        """Some layers keep a constant-size state per sequence (linear attention / Mamba)."""
        return bool(self.state_layers)

    @property
    def kv_layers(self) -> int:
        """Layers that keep a KV cache (all but the state layers and the cache-free blocks)."""
        return self.num_layers - len(self.state_layers) - len(self.no_cache_layers)

    @property
    def is_moe(self) -> bool:
        return bool(self.moe_num_experts)

    @property
    def is_mla(self) -> bool:
        return self.mla_kv_lora_rank is not None


@dataclass(frozen=True)
class ApiPrice:
    """A hosted-API price in USD per 1M tokens."""

    model: str
    provider: str
    provider_model_id: str
    input_usd_per_mtok: float
    output_usd_per_mtok: float
    source: str
    as_of: str
    genai_prices_provider_id: str = ""  # the provider's id in genai-prices, when it has this model
    cache_read_usd_per_mtok: float | None = None  # input tokens served from the provider's prompt cache; None: none


# platform_prices.csv `region` of a price AWS charges alike in every commercial region (EKS control plane,
# public IPv4); a region's own row wins over it
ALL_REGIONS = "*"


@dataclass(frozen=True)
class PlatformPrice:
    item: str
    unit: str
    usd: float
    region: str
    source: str
    as_of: str


@dataclass(frozen=True)
class PrecisionFormat:
    """How a weight precision is stored and computed (from precisions.csv)."""

    name: str
    weight_bits: int
    group_size: int  # 0 = per-channel or none
    scale_bits: int  # bits of scale (and zero point) per group
    quantizes_embeddings: bool
    activation_dtype_native: str  # the tensor-core dtype when natively supported
    native_activation_archs: tuple[str, ...]
    supported_archs: tuple[str, ...]  # GPU generations that run it at all (natively or weight-only)
    fallback_on_other_archs: str  # "weight-only" or "none" (unsupported)
    needs_prequantized_checkpoint: bool  # AWQ/GPTQ/INT8/FP4 need a quantized checkpoint; FP8 quantizes on load
    vllm_quantization: str
    source: str
    as_of: str

    @property
    def bytes_per_param(self) -> float:
        """Bytes per quantized weight including its share of group scales."""
        extra = self.scale_bits / self.group_size if self.group_size else 0.0
        return (self.weight_bits + extra) / 8.0


@dataclass(frozen=True)
class EngineDefaults:
    """A serving engine's defaults and fixed per-GPU memory costs (GiB per GPU)."""

    engine: str
    default_max_num_seqs: int
    default_max_num_batched_tokens: int
    default_gpu_memory_utilization: float
    cuda_context_gib_per_gpu: float
    cuda_graphs_gib_per_gpu: float
    # kernel rules (sizing.perf.step / memory): an AWQ checkpoint served with `--quantization awq`
    # dequantizes to 16 bits from this many tokens a step (None: no such path); FP8 W8A8 MoE experts
    # compute at the 16-bit rate (a Triton fused-MoE kernel); bytes per logit the memory profile's
    # sampler holds (None: fp32 logits of the default batch, vocabulary-sharded)
    awq_unfused_dequantize_min_tokens: int | None
    fp8_moe_experts_at_16_bit_rate: bool
    profile_sampler_bytes_per_logit: float | None
    # what the memory fraction flag bounds: `all` (vLLM --gpu-memory-utilization: weights, activations, CUDA
    # graphs and KV) or `weights-kv` (SGLang --mem-fraction-static: weights and the KV pool of the memory
    # left after the CUDA context; graphs and activations use the rest) or `free` (TensorRT-LLM
    # kv_cache_free_gpu_mem_fraction: the KV pool's share of the memory free once the engine is loaded)
    memory_fraction_covers: str
    # KV admission: True when the engine admits a request only if the KV cache can hold every running
    # request to completion (TensorRT-LLM's GUARANTEED_NO_EVICT: a running slot holds prompt + output
    # tokens); False when blocks are allocated as tokens arrive (vLLM, SGLang: prompt + tokens so far)
    kv_reserved_to_completion: bool
    source: str
    as_of: str


@dataclass(frozen=True)
class PlatformSetting:
    """One platform default or rule (platform.csv): `value` is text; numbers are read with Catalog.number."""

    item: str
    value: str
    unit: str
    source: str
    as_of: str


@dataclass(frozen=True)
class CpuInstance:
    """A CPU instance type for the system node group (cpu_instance_prices.csv): USD per hour per region
    and purchase, vCPUs and memory (GiB) to pack the system pods."""

    instance_type: str
    region: str
    purchase: str
    usd_per_hour: float
    vcpus: int
    memory_gib: float
    source: str
    as_of: str


@dataclass(frozen=True)
class SystemPod:
    """One pod on the system nodes (system_pods.csv): requests per replica (millicores, MiB), image GiB."""

    component: str
    replicas: int
    cpu_m: int
    memory_mib: int
    image_gib: float


@dataclass(frozen=True)
class DaemonSetRequest:
    """A DaemonSet's requests on one node (node_daemonsets.csv): millicores and MiB per node."""

    name: str
    namespace: str
    cpu_millicores: int
    memory_mib: int
    set_by: str
    source: str
    on_gpu_nodes: bool = True
    only_on_efa_nodes: bool = False  # runs only on GPU nodes on EFA (the EFA device plugin)


@dataclass(frozen=True)
class Interconnect:
    """A GPU's PCIe link (interconnects.csv): GB/s (1e9 bytes/s) per direction."""

    gpu: str
    pcie_bandwidth_gbs_per_direction: float
    source: str
    as_of: str


@dataclass(frozen=True)
class NetworkCards:
    """An instance type's network cards (network_cards.csv): how many, and the primary card's baseline
    bandwidth in Gbit/s (the card the node's one ENA interface sits on)."""

    instance_type: str
    network_cards: int
    primary_card_gbps: float
    source: str
    as_of: str


@dataclass(frozen=True)
class CheckpointFacts:
    """A served checkpoint's pinned facts (checkpoints.csv)."""

    hf_id: str
    revision: str | None  # a Hub commit SHA; None = not pinned (the hub's main branch)
    safetensors_bytes: int | None  # exact total of the .safetensors files; None = unknown
    source: str
    gated: bool | None = None  # the Hub repository asks for an accepted license and a token; None = unknown


@dataclass(frozen=True)
class QuotaFamily:
    """The EC2 vCPU quota that limits instance families starting with `family_prefix` (quota_families.csv)."""

    family_prefix: str
    purchase: str
    quota_name: str


@dataclass(frozen=True)
class AwsGpuName:
    """How EC2 DescribeInstanceTypes names a GPU, within a memory range (MiB per GPU), and its gpus.csv name."""

    aws_gpu_name: str
    min_gpu_memory_mib: int
    max_gpu_memory_mib: int | None
    gpu: str


@dataclass(frozen=True)
class ApiModel:
    """A hosted-API model a plan is compared with (api_models.csv); parameters in billions."""

    api_model: str
    params_active_b: float
    params_total_b: float
    exact_hf_ids: tuple[str, ...]


def platform_setting_from_row(r: dict[str, str]) -> PlatformSetting:
    return PlatformSetting(r["item"], r["value"].strip(), r["unit"], r["source"], r["as_of"])


def system_pod_from_row(r: dict[str, str]) -> SystemPod:
    return SystemPod(r["component"], int(r["replicas"]), int(r["cpu_m"]), int(r["memory_mib"]), float(r["image_gib"]))


def daemonset_from_row(r: dict[str, str]) -> DaemonSetRequest:
    return DaemonSetRequest(r["daemonset"], r["namespace"], int(r["cpu_millicores"]), int(r["memory_mib"]),
                            r["set_by"], r["source"], flag(r["on_gpu_nodes"]),
                            flag(r.get("only_on_efa_nodes", "")))


def parse_layers(v: str) -> tuple[int, ...]:
    v = (v or "").strip().lower()
    if not v or v == "none":
        return ()
    if v.startswith("even"):
        return ("even",)  # type: ignore[return-value]  # resolved against num_layers below
    if v.startswith("odd"):
        return ("odd",)  # type: ignore[return-value]
    out: list[int] = []
    for part in v.replace(";", " ").replace(",", " ").split():
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part.isdigit():
            out.append(int(part))
    return tuple(out)


def model_from_row(r: dict[str, str]) -> ModelArch:
    n_layers = int(r["num_layers"])
    layers = parse_layers(r.get("sliding_window_layers", ""))
    if layers and isinstance(layers[0], str):
        start = 0 if layers[0] == "even" else 1
        layers = tuple(range(start, n_layers, 2))
    return ModelArch(
        hf_id=r["hf_id"], short_name=r["short_name"], family=r["family"],
        params_total_b=float(r["params_total_b"]), params_active_b=float(r["params_active_b"]),
        num_layers=n_layers, hidden_size=int(r["hidden_size"]),
        intermediate_size=opt_int(r["intermediate_size"]), num_attention_heads=int(r["num_attention_heads"]),
        num_kv_heads=int(r["num_kv_heads"]), head_dim=opt_int(r["head_dim"]), vocab_size=int(r["vocab_size"]),
        tie_word_embeddings=flag(r["tie_word_embeddings"]),
        max_position_embeddings=int(r["max_position_embeddings"]), attention_kind=r["attention_kind"],
        sliding_window=opt_int(r["sliding_window"]), sliding_window_layers=layers,
        mla_kv_lora_rank=opt_int(r["mla_kv_lora_rank"]), mla_qk_rope_head_dim=opt_int(r["mla_qk_rope_head_dim"]),
        mla_qk_nope_head_dim=opt_int(r["mla_qk_nope_head_dim"]), mla_v_head_dim=opt_int(r["mla_v_head_dim"]),
        moe_num_experts=opt_int(r["moe_num_experts"]), moe_experts_per_token=opt_int(r["moe_experts_per_token"]),
        moe_shared_experts=opt_int(r["moe_shared_experts"]), moe_intermediate_size=opt_int(r["moe_intermediate_size"]),
        first_k_dense_layers=opt_int(r["first_k_dense_layers"]), torch_dtype=r["torch_dtype"] or None,
        source=r["source"], as_of=r["as_of"],
    )
