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
# 3 (issue 29): Pool.engine (the engine its pods run: vllm | sglang) and Plan.engines (the best plan of each
# engine the workload allows, and why one was chosen); plans saved at 2 load with engine vllm and no engines.
# 4 (issue 33): `classes` on every plan (per-class targets and predicted p50/p95/p99), and for a trace
# or multi-class stack `trace` (what the trace says) and `fleet` (the replayed fleet, shared vs dedicated).
SCHEMA_VERSION = 4
Z90_OVER_Z95 = 1.2816 / 1.6449  # standard-normal quantiles z0.90 / z0.95


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VllmSettings(_M):
    """Engine settings for one pool; infra/ maps them to the pool's engine flags in one place
    (infra/kubernetes/vllm_args.py for vLLM; infra/kubernetes/sglang_args.py for SGLang: max_num_seqs is
    --max-running-requests,
    max_num_batched_tokens --chunked-prefill-size, gpu_memory_utilization --mem-fraction-static)."""

    model: str  # the Hugging Face id to serve
    served_model_name: str
    # further names the pool answers to (vLLM --served-model-name takes several; the first names responses and
    # metrics): a dedicated layout's default class pool also answers the model's plain name
    served_model_aliases: list[str] = Field(default_factory=list)
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
    # SGLang --schedule-policy (None for vLLM, whose default FCFS the simulation models): fcfs, or lpm (longest
    # prefix match) when the workload reuses prefixes (infra/data/sglang_values.yaml)
    schedule_policy: str | None = None


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
    # the network between a multi-node replica's nodes the performance model assumed (sizing/perf/fabric.py):
    # "efa" (NCCL over aws-ofi-nccl, the instance's aggregate bandwidth), "efa-sockets" (EFA attached, but the
    # engine image has no aws-ofi-nccl: TCP on the primary card) or "ena" (no EFA: TCP on the primary card);
    # "" on one node. Gbit/s per node. infra attaches EFA for "efa" and "efa-sockets" (infra/config/efa_cards.py)
    inter_node_fabric: str = ""
    inter_node_gbps: float = 0.0
    replicas: int  # planned, including redundancy
    replicas_for_demand: int
    redundancy_replicas: int
    # replicas (spares included) if per-replica goodput were the p90 / the p10 of the model's held-out
    # measured ÷ predicted throughput (perf_calibration.json goodput_range): [fewest, most]; [] in old plans
    replicas_range: list[int] = []
    replicas_per_instance: int
    instances_min: int
    instances_desired: int
    instances_max: int
    replicas_max: int
    precision: str
    purchase: str  # on-demand | spot | reservation (an ODCR) | capacity-block
    usd_per_instance_hour: float
    # the rate usd_per_instance_hour is (a prices.csv purchase kind, e.g. savings-plan-1yr for
    # commitment-discounted on-demand instances, or "stack" for a capacity-block rate the stack gave)
    rate_basis: str = ""
    # the llmcap:hardware.capacity entry the pool runs on (purchase reservation | capacity-block)
    capacity_reservation_id: str | None = None
    availability_zone_id: str | None = None  # the reservation's AZ: the node group's only subnets
    capacity_ends: str | None = None  # ISO date the reservation ends; after it the pool has no capacity
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
    engine: str = "vllm"  # the serving engine its pods run (llmcap:workload.engine; the chosen one of a list)
    # the request class this pool serves alone (a dedicated layout, Plan.fleet); None = every class
    request_class: str | None = None
    vllm: VllmSettings
    per_replica: PerReplica


class Totals(_M):
    gpus: int
    instances: int
    usd_per_hour: float  # GPU instances, at desired size
    usd_per_month: float  # 730 h
    usd_per_month_min: float  # node-group minimums
    usd_per_month_max: float  # autoscaling maximums
    # GPUs and GPU $/month (730 h) if per-replica goodput were the p90 / the p10 of the model's held-out
    # measured ÷ predicted throughput (grouped by publisher, perf_calibration.json goodput_range): the
    # model's own uncertainty, not autoscaling; [fewest, most]; [] in plans saved before it
    gpus_range: list[int] = []
    usd_per_month_range: list[float] = []
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


class PurchaseOption(_M):
    """The planned fleet (desired instances) priced under one purchase option, side by side.
    usd None = no rate for some instance type in the catalog (`note` says which and how to get it)."""

    option: str  # on-demand | spot | reserved-1yr | reserved-3yr | savings-plan-1yr | savings-plan-3yr | ...
    usd_per_month: float | None  # GPU instances only, 730 h
    usd_per_million_output_tokens: float | None  # GPU only, at planned load
    source: str = ""
    as_of: str = ""
    note: str = ""


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
    # prefix reuse: the share of input tokens billed at the API's cache-read price (the same share the
    # self-hosted plan is sized with: workload.prefix_cache_hit_rate, or what a trace's replay served); 0 when
    # the API has no cache-read price (then every input token at the input price) or nothing is reused
    usd_per_million_cached_input_tokens: float | None = None  # the API's cache-read price; None: it has none
    cached_input_share: float = 0.0
    prefix_share: float = 0.0  # the workload's prefix-reuse share the bill was figured for
    input_mtok_per_month: float = 0.0  # the traffic the bill is for, millions of tokens a month
    output_mtok_per_month: float = 0.0

    def cached_note(self) -> str:
        """'cached input at $x/1M' (with its share), why there is none, or '' when nothing is reused."""
        if self.prefix_share <= 0:
            return ""
        if self.usd_per_million_cached_input_tokens is None:
            return f"no cache-read price: {self.prefix_share:.0%} reused input at the full input price"
        return f"{self.cached_input_share:.0%} of input cached at ${self.usd_per_million_cached_input_tokens:g}/1M"


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


class EngineChoice(_M):
    """The cheapest plan of one engine the workload allows (llmcap:workload.engine as a list), beside
    the others: what it would deploy and cost, and whether it was chosen."""

    engine: str
    feasible: bool
    chosen: bool = False
    gpu: str = ""
    instance_type: str = ""
    precision: str = ""
    tensor_parallel: int = 0
    replicas: int = 0
    gpus: int = 0
    goodput_output_tokens_per_s_per_replica: float = 0.0
    usd_per_month: float | None = None  # GPU instances at desired size
    all_in_usd_per_month: float | None = None
    usd_per_million_output_tokens: float | None = None  # GPU only, at planned load
    why: str  # why it was chosen, or why not (dearer by how much, or why no plan of it is feasible)


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


class Percentiles(_M):
    """One latency metric's predicted percentiles, ms."""

    p50: float
    p95: float
    p99: float


class ClassTarget(_M):
    metric: str  # ttft | itl | tpot | e2e
    percentile: str  # p50 | p90 | p95 | p99
    ms: float


class ClassResult(_M):
    """One request class at the planned fleet: its targets, predicted percentiles (ms) and whether every
    target holds. A single-class stack has one, named "default". Batch classes have no latency targets and
    report their time to finish (hours) against their deadline."""

    name: str
    kind: str = "interactive"  # interactive | batch
    requests_per_s: float = 0.0  # this class's arrival rate, requests/s (0: a closed-loop workload of concurrent users)
    targets: list[ClassTarget] = Field(default_factory=list)
    ttft_ms: Percentiles
    itl_ms: Percentiles
    tpot_ms: Percentiles
    e2e_ms: Percentiles
    slo_met: bool
    source: str = ""  # how they were predicted: "analytic model at the planned load" | "trace replay" | ...
    replicas: int = 0  # replicas serving this class (its own pool, or the shared pool)
    deadline_hours: float | None = None  # batch: the deadline
    time_to_finish_hours: float | None = None  # batch: predicted with its replicas


class TraceSummary(_M):
    """What the trace says (sizing.traffic.stats): rates per second, peaks over sliding 1 s / 60 s windows,
    token percentiles, class mix (share of requests), and the share of prompt tokens an unbounded prefix
    cache would serve (`prefix_reuse_share`) next to the share the planned fleet's caches did serve."""

    source: str
    requests: int
    span_s: float
    mean_requests_per_s: float
    peak_requests_per_s_1s: float
    peak_requests_per_s_60s: float
    prefix_reuse_share: float
    prefix_hit_share_planned: float = 0.0
    prompt_tokens: dict[str, float] = Field(default_factory=dict)
    output_tokens: dict[str, float] = Field(default_factory=dict)
    class_mix: dict[str, float] = Field(default_factory=dict)
    time_scale: float = 1.0


class ClassAutoscaling(_M):
    """KEDA's bounds for one class's own pool (a dedicated layout), from that class's load: replicas and
    waiting requests per replica, as FleetChoice's for a single pool."""

    min_replicas: int
    max_replicas: int
    warm_standby_replicas: int = 0
    queue_threshold: int
    why: str


class FleetChoice(_M):
    """The fleet found by replaying the requests (trace, or the classes' synthesized Poisson streams) over
    N replicas of the chosen candidate (sizing.planning.fleet). `layout`: shared (classes mixed on one pool)
    or dedicated (a pool per class); `why` says which was cheaper. `mean_based_replicas`: what the analytic
    mean-rate plan chose."""

    layout: str
    why: str
    routing: str
    replicas: int  # serving the demand, before redundancy
    replicas_by_class: dict[str, int] = Field(default_factory=dict)  # dedicated layout: each class's pool
    mean_based_replicas: int
    difference: str  # where the replayed fleet and the mean-based one differ, and why
    replays: int  # fleets simulated
    clipped_requests: int = 0
    autoscaling_min_replicas: int = 0
    autoscaling_max_replicas: int = 0
    warm_standby_replicas: int = 0  # kept serving so the busiest ramp is absorbed while new ones cold-start
    queue_threshold: int = 0  # KEDA's target of waiting requests per replica
    autoscaling_why: str = ""
    # a dedicated layout: each class's pool's autoscaling (its own load and targets)
    class_autoscaling: dict[str, ClassAutoscaling] = Field(default_factory=dict)
    default_class: str = ""  # a dedicated layout: the class whose pool also answers the model's plain name


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
    purchase_options: list[PurchaseOption] = Field(default_factory=list)
    alternatives: list[Alternative] = Field(default_factory=list)
    engines: list[EngineChoice] = Field(default_factory=list)  # one per allowed engine when several are allowed
    rejections: list[Rejection] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    budget_usd_month: float | None = None  # the stack's llmcap:budget_usd_month, if set (all-in)
    classes: list[ClassResult] = Field(default_factory=list)  # one per request class (schema 3)
    trace: TraceSummary | None = None  # a trace stack's statistics
    fleet: FleetChoice | None = None  # a trace or multi-class stack: the replayed fleet

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls.model_validate_json(text)
