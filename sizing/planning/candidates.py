"""Candidate deployments: one instance type × tensor/pipeline parallelism × precision, enumerated
for a strategy, and the replica and instance arithmetic of an evaluated one (sizing.planning.search
evaluates them for fit, SLO goodput and cost, or rejects them with a reason).

Reason codes: not-offered, no-price, no-gpu-specs, fractional-gpu, unsupported-precision,
needs-checkpoint, bad-parallelism, does-not-fit, misses-itl, misses-ttft.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sizing.perf.fabric import NodeFabric, node_fabric
from sizing.plan import Rejection

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import Instance, ModelArch
    from sizing.perf.load import Goodput
    from sizing.perf.memory import MemoryFit
    from sizing.perf.replica import ReplicaConfig
    from sizing.planning.demand import Demand
    from sizing.planning.problem import PlanningProblem

MAX_NODES_PER_REPLICA = 4  # pipeline stages across nodes the planner will consider


@dataclass(frozen=True)
class Candidate:
    instance: Instance
    precision: str
    tp: int
    pp: int  # pipeline stages; > 1 only across nodes (one stage per node)
    fabric: NodeFabric | None = None  # the network between its nodes (pp > 1; sizing/perf/fabric.py)

    @property
    def nodes_per_replica(self) -> int:
        return self.pp

    @property
    def replicas_per_instance(self) -> int:
        return max(self.instance.whole_gpus // self.tp, 1) if self.pp == 1 else 1

    def with_fabric(self, cfg: ReplicaConfig) -> ReplicaConfig:
        """`cfg` with this candidate's inter-node fabric (ReplicaConfig fabric, fabric_gbps)."""
        if self.fabric is None:
            return cfg
        return replace(cfg, fabric=self.fabric.name, fabric_gbps=self.fabric.gbps)

    def label(self) -> str:
        par = f"TP{self.tp}" + (f"×PP{self.pp}" if self.pp > 1 else "")
        return f"{self.instance.instance_type} {self.precision} {par}"


@dataclass(frozen=True)
class Tuning:
    """The flags chosen for one candidate and how they were decided."""

    max_num_batched_tokens: int
    max_num_seqs: int
    default_budget: int
    budgets: tuple[int, int]  # the smallest and largest max_num_batched_tokens tried
    analytic_output_tokens_per_s: float  # goodput per replica, analytic, at the chosen flags
    simulated: bool  # the goodput load was checked by the step-level simulation
    binds: str  # one line: which constraint binds, from the simulation where it ran
    bound_code: str  # itl-tail | ttft-queueing | kv-capacity | engine-limit | "" (analytic binding applies)
    predicted: dict[str, float]  # "ttft_p50_ms" ... from the simulation at the goodput load (ms)

    def describe(self) -> str:
        """The plan's one-line account of the flags (PerReplica.batching)."""
        return (f"max_num_batched_tokens {self.max_num_batched_tokens:,}, max_num_seqs {self.max_num_seqs:,}: "
                f"the best goodput at the SLO over budgets {self.budgets[0]:,}–{self.budgets[1]:,} (default "
                f"{self.default_budget:,}), checked by the step-level simulation")


@dataclass(frozen=True)
class Evaluated:
    """A feasible candidate sized for the demand."""

    cand: Candidate
    fit: MemoryFit
    gp: Goodput
    usd_per_instance_hour: float
    price_source: str
    replicas_for_demand: int
    replicas: int
    instances: int
    usd_per_hour: float
    goodput_scale: float = 1.0  # measured ÷ predicted, from the user's calibration overlay
    tuning: Tuning | None = None  # batching flags chosen and simulated (finalists only: sizing.planning.batching)

    @property
    def goodput_output_tokens_per_s(self) -> float:
        """Goodput per replica at the SLO (tokens/s), calibrated by the overlay when there is one."""
        return self.gp.output_tokens_per_s * self.goodput_scale

    @property
    def goodput_requests_per_s(self) -> float:
        return self.gp.requests_per_s * self.goodput_scale

    @property
    def gpus(self) -> int:
        return self.instances * self.cand.instance.whole_gpus


def size_replicas(demand_output_tokens_per_s: float, goodput_output_tokens_per_s_per_replica: float,
                  redundancy: int, concurrent_users: int | None = None,
                  goodput_concurrency_per_replica: float | None = None) -> tuple[int, int]:
    """(replicas for the demand, replicas planned) = ceil(demand ÷ goodput per replica) + redundancy.

    With concurrent users, a replica also holds at most the concurrency at which it meets the
    SLO, so replicas for the demand ≥ ceil(users ÷ that concurrency). At least one replica.
    """
    need = math.ceil(demand_output_tokens_per_s / goodput_output_tokens_per_s_per_replica - 1e-9)
    if concurrent_users and goodput_concurrency_per_replica:
        need = max(need, math.ceil(concurrent_users / goodput_concurrency_per_replica - 1e-9))
    need = max(need, 1)
    return need, need + redundancy


def instances_for(cand: Candidate, replicas: int) -> int:
    """Instances that hold `replicas`: packed replicas_per_instance to a node, or pp nodes each."""
    if cand.pp > 1:
        return replicas * cand.pp
    return math.ceil(replicas / cand.replicas_per_instance)


def replicas_with_spares(cand: Candidate, replicas_for_demand: int, redundancy: int) -> int:
    """Replicas to run: the demand's plus `redundancy` spares, counted in failure units.

    When one node holds several replicas (e.g. 8 × TP1 on a p4de), a spare replica on the same
    node as the ones it protects protects nothing: the node is the failure unit. So spares are
    whole nodes there (losing `redundancy` nodes still leaves the demand served), and the slots of
    the nodes the plan pays for are filled with replicas, which is free headroom. With one
    replica per node (or a replica spanning nodes) it is exactly `redundancy` extra replicas.
    """
    rpi = cand.replicas_per_instance
    if redundancy <= 0 or cand.pp > 1 or rpi <= 1:
        return replicas_for_demand + max(redundancy, 0)
    return (math.ceil(replicas_for_demand / rpi) + redundancy) * rpi


def strategy_of(inst: Instance) -> str:
    """scale-up = the P family (A100/H100/H200/B200); scale-out = the G family (L4/A10G/L40S...)."""
    return "scale-up" if inst.is_p_family else "scale-out"


def strategy_allows(strategy: str, inst: Instance) -> bool:
    """Whether `strategy` (auto, mixed, scale-up, scale-out) may use this instance type."""
    return strategy in ("auto", "mixed") or strategy_of(inst) == strategy


def _tp_options(inst: Instance, model: ModelArch) -> list[int]:
    n = inst.whole_gpus
    return [t for t in (1, 2, 4, 8) if t <= n and n % t == 0 and model.num_attention_heads % t == 0]


def enumerate_candidates(p: PlanningProblem, strategy: str, rejections: list[Rejection]) -> Iterator[Candidate]:
    """Every allowed instance type × precision × TP (and PP across nodes when no single node fits)."""
    cat, model, w, hw, region = p.catalog, p.model, p.workload, p.hardware, p.region
    allowed_gpus = {cat.gpu(g).name for g in hw.gpus} if hw.gpus else None
    allowed_types = set(hw.instance_types) if hw.instance_types else None
    for inst in cat.instances.values():
        if allowed_gpus is not None and inst.gpu not in allowed_gpus:
            continue
        if allowed_types is not None and inst.instance_type not in allowed_types:
            continue
        if not strategy_allows(strategy, inst):
            continue

        def reject(code: str, detail: str, precision: str = "*", tp: int = 0, pp: int = 1,
                   _inst: Instance = inst) -> None:
            rejections.append(Rejection(gpu=_inst.gpu, instance_type=_inst.instance_type, precision=precision,
                                        tensor_parallel=tp, pipeline_parallel=pp, reason=code, detail=detail))

        if inst.gpu not in cat.gpus:
            reject("no-gpu-specs", f"no datasheet row for GPU {inst.gpu!r} in gpus.csv")
            continue
        if inst.is_fractional:
            reject("fractional-gpu", f"{inst.gpu_count:g} of a GPU per instance; vLLM needs whole GPUs")
            continue
        if not cat.offered_azs(inst.instance_type, region):
            reject("not-offered", f"not offered in {region}")
            continue
        for precision in w.precisions:
            tps = _tp_options(inst, model)
            if not tps:
                reject("bad-parallelism", f"{model.num_attention_heads} attention heads do not split over "
                       f"{inst.whole_gpus} GPUs", precision)
                continue
            for tp in tps:
                yield Candidate(inst, precision, tp, 1)
            if inst.is_p_family or inst.whole_gpus >= 4:
                full = inst.whole_gpus if inst.whole_gpus in tps else max(tps)
                for pp in range(2, MAX_NODES_PER_REPLICA + 1):
                    yield Candidate(inst, precision, full, pp, node_fabric(cat, inst, pp, w.single_engine))


def precision_supported(cat: Catalog, gpu: str, precision: str) -> str | None:
    """None when the GPU can run the precision (natively or weight-only); else why not."""
    g = cat.gpu(gpu)
    fmt = cat.precision(precision)
    if precision == "bf16" and not g.bf16_supported:
        return f"{gpu} ({g.architecture}) has no BF16 support"
    if g.generation not in fmt.supported_archs:
        return f"{precision} runs on {'/'.join(fmt.supported_archs)} GPUs; {gpu} is {g.generation}"
    return None


def resize(ev: Evaluated, demand: Demand, redundancy: int, goodput_scale: float = 1.0) -> Evaluated:
    """The same feasible candidate sized for another demand of the same mode and request shape.

    Goodput per replica does not depend on how much demand there is, so a users or rate sweep
    evaluates each candidate once and re-sizes it per point; agrees with `evaluate` (tested)."""
    need, _ = size_replicas(demand.output_tokens_per_s, ev.gp.output_tokens_per_s * goodput_scale,
                            redundancy, demand.concurrent_users if demand.mode == "closed" else None,
                            ev.gp.concurrency * goodput_scale)
    replicas = replicas_with_spares(ev.cand, need, redundancy)
    instances = instances_for(ev.cand, replicas)
    return replace(ev, replicas_for_demand=need, replicas=replicas, instances=instances,
                   usd_per_hour=instances * ev.usd_per_instance_hour)
