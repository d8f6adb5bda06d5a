"""The Plan: the one contract every consumer reads (CLI views, infra/, diff, compare).

Plain JSON types only, with a `schema_version`. A saved plan JSON re-renders without
recomputing. Field names carry units and scope.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sizing.spec import HardwareSpec, WorkloadSpec

# 2 (issue 14): model_cache_gib_per_node is the WHOLE checkpoint + headroom on every node (was the
# stage's share), checkpoint_gib the checkpoint pool.vllm.model really is, root_volume_gib excludes the
# cache on instance-store nodes, requests come from the node-allocatable model; checkpoint_revision added.
SCHEMA_VERSION = 2
Z90_OVER_Z95 = 1.2816 / 1.6449  # standard-normal quantiles z0.90 / z0.95


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VllmSettings(_M):
    """Engine settings for one pool; infra/ maps them to vLLM flags in one place."""

    model: str  # the Hugging Face id to serve
    served_model_name: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    quantization: str | None = None  # vLLM --quantization, None = auto/unquantized
    kv_cache_dtype: str = "auto"
    enable_prefix_caching: bool = True
    dtype: str = "auto"


class PerReplica(_M):
    """Predicted figures of one replica (tp × pp GPUs) at the planned load."""

    weights_gib_per_gpu: float
    kv_cache_gib_per_gpu: float
    max_concurrent_sequences: int
    goodput_output_tokens_per_s: float  # the largest load that meets both SLO percentiles
    # p10-p90 range of that goodput from the model's leave-one-source-out throughput error
    # (perf_calibration.json goodput_range); replicas and cost ranges scale by its inverse
    goodput_output_tokens_per_s_p10: float = 0.0
    goodput_output_tokens_per_s_p90: float = 0.0
    goodput_requests_per_s: float
    planned_concurrency: float  # active requests per replica at planned load
    planned_output_tokens_per_s: float
    ttft_p95_ms: float  # at planned load
    itl_p95_ms: float
    ttft_ms: float
    itl_ms: float
    # what stops this replica's goodput from growing (sizing.perf.binding): itl-tail | ttft-queueing |
    # kv-capacity | engine-limit (saved plans before 2026-12 carry the step regime here instead)
    bound: str
    weights_load_s: float  # expected cold-start weight load time from the planned storage
    binds: str = ""  # one line: what binds, at which load, and the decode step's regime
    cold_start_s: float = 0.0  # a new replica on a new node until it serves (sizing/perf/cold_start.py), seconds
    # predicted percentiles at the planned load, ms (TTFT and E2E over requests, ITL over token gaps,
    # TPOT over requests' mean gaps); 0 in plans saved before they were reported
    ttft_p50_ms: float = 0.0
    ttft_p99_ms: float = 0.0
    itl_p50_ms: float = 0.0
    itl_p99_ms: float = 0.0
    tpot_p50_ms: float = 0.0
    tpot_p95_ms: float = 0.0
    tpot_p99_ms: float = 0.0
    e2e_p50_ms: float = 0.0
    e2e_p95_ms: float = 0.0
    e2e_p99_ms: float = 0.0
    # the step-level simulation (sizing/perf/sim.py) at the goodput load, "ttft_p50_ms" ... "e2e_p99_ms"
    simulated_at_goodput_ms: dict[str, float] = Field(default_factory=dict)
    batching: str = ""  # how max_num_batched_tokens / max_num_seqs were chosen (sizing/planning/batching.py)

    def percentile(self, metric: str, q: str) -> float:
        """Predicted metric (ttft | itl | tpot | e2e) at percentile q (p50 | p90 | p95 | p99) at the planned
        load, ms; 0 for a percentile a plan saved before 2026-11 did not report. p90 lies between p50 and
        p95 at the normal quantiles' ratio (as sizing.perf.load.LoadEstimate.percentile)."""
        if q == "p90":
            lo, hi = self.percentile(metric, "p50"), self.percentile(metric, "p95")
            return lo + (hi - lo) * Z90_OVER_Z95
        return float(getattr(self, f"{metric}_{q}_ms"))


class Pool(_M):
    """One node group: one instance type, its replicas and scaling bounds."""

    name: str
    instance_type: str
    gpu: str
    gpus_per_instance: int
    tensor_parallel: int
    pipeline_parallel: int
    nodes_per_replica: int = 1  # > 1 for multi-node replicas (pipeline parallel across nodes)
    replicas: int  # planned, including redundancy
    replicas_for_demand: int
    redundancy_replicas: int
    replicas_per_instance: int
    instances_min: int
    instances_desired: int
    instances_max: int
    replicas_max: int
    precision: str
    purchase: str  # on-demand | spot
    usd_per_instance_hour: float
    usd_per_hour: float  # desired instances
    demand_share: float = 1.0  # share of the demand this pool serves
    local_nvme_gb: int = 0
    checkpoint_gib: float = 0.0  # the whole checkpoint vllm.model (16-bit when quantized on load), GiB
    checkpoint_revision: str | None = None  # the Hugging Face commit the copy Job downloads; None = main
    model_cache_gib_per_node: float = 0.0  # one whole checkpoint copy on each node + headroom (emptyDir limit)
    root_volume_gib: int = 0  # root EBS volume per GPU node: OS + image (+ one model copy without instance store)
    cpu_millicores_per_replica: int = 0  # pod CPU request: the node's allocatable vCPUs split between its replicas
    memory_mib_per_replica: int = 0  # pod memory request, likewise (per node for a multi-node replica)
    goodput_scale: float = 1.0  # measured ÷ predicted goodput from the user's calibration overlay (1: none)
    vllm: VllmSettings
    per_replica: PerReplica


class Totals(_M):
    gpus: int
    instances: int
    usd_per_hour: float  # GPU instances, at desired size
    usd_per_month: float  # 730 h
    usd_per_month_min: float  # node-group minimums
    usd_per_month_max: float  # autoscaling maximums
    platform_usd_per_month: float  # EKS control plane, system nodes, NAT, storage
    all_in_usd_per_month: float
    usd_per_million_output_tokens: float  # GPU only, at planned load
    usd_per_million_output_tokens_at_capacity: float  # GPU only, at full goodput
    all_in_usd_per_million_output_tokens: float
    utilization: float  # planned load / goodput capacity
    demand_output_tokens_per_s: float
    capacity_output_tokens_per_s: float


class CostLine(_M):
    """One priced line, e.g. "GPU instances (on-demand, g6.12xlarge)". usd None = not priced."""

    name: str
    quantity: float
    unit: str
    usd_per_month: float | None
    source: str = ""


class ApiComparison(_M):
    provider: str
    model: str
    exact_model: bool  # False when the nearest comparable model is shown
    usd_per_million_input_tokens: float
    usd_per_million_output_tokens: float
    usd_per_month_same_traffic: float
    ratio_to_self_hosted: float  # API bill / self-hosted all-in monthly cost
    break_even_output_tokens_per_month: float | None  # volume where self-hosting costs the same
    source: str = ""


class Alternative(_M):
    strategy: str
    gpu: str
    instance_type: str
    precision: str
    tensor_parallel: int
    feasible: bool
    gpus: int = 0
    instances: int = 0
    usd_per_month: float | None = None
    usd_per_million_output_tokens: float | None = None
    why_not_chosen: str


class Rejection(_M):
    gpu: str
    instance_type: str
    precision: str
    tensor_parallel: int
    pipeline_parallel: int = 1
    reason: str  # does-not-fit | misses-ttft | misses-itl | no-price | not-offered | unsupported-precision
    detail: str


class SystemNodePlan(_M):
    """The CPU system node group (router, KEDA, Prometheus, add-ons), sized by the planner from the
    system pods' requests (sizing/planning/system_nodes.py)."""

    instance_type: str
    desired: int  # nodes the system pods' requests need (at least llmcap:deployment.system_node_count)
    min_size: int
    max_size: int  # the Cluster Autoscaler may grow the group to this
    root_volume_gib: int  # per node: every system image + margin, GiB
    cpu_m_requested: int  # all system pods' CPU requests, millicores (total)
    memory_mib_requested: int  # all system pods' memory requests, MiB (total)


class PlatformPlan(_M):
    """The platform around the GPU pools, resolved once by the planner and read by infra/ as is."""

    system_nodes: SystemNodePlan
    nat_gateways: int  # NAT gateways of the VPC llmcap creates (one per AZ used, capped); 0 with your own VPC


class Plan(_M):
    schema_version: int = SCHEMA_VERSION
    stack: str
    region: str
    model: str
    strategy: str
    purchase: str
    workload: WorkloadSpec  # the stack's validated workload (read by every renderer, infra and the diff)
    hardware: HardwareSpec
    platform: PlatformPlan
    demand: dict[str, Any]  # how demand was derived (users × tokens/s, or rate × output tokens)
    pools: list[Pool]
    totals: Totals
    cost_lines: list[CostLine] = Field(default_factory=list)
    api_comparison: list[ApiComparison] = Field(default_factory=list)
    alternatives: list[Alternative] = Field(default_factory=list)
    rejections: list[Rejection] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    budget_usd_month: float | None = None  # the stack's llmcap:budget_usd_month, if set (all-in)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls.model_validate_json(text)
