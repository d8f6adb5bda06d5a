"""One strategy's search: every candidate it allows, sized by the performance model, the feasible ones
ranked by cost (USD per hour for the whole fleet, then GPUs, then goodput), the rest with reasons."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sizing.perf.goodput import goodput
from sizing.perf.load import Goodput, WorkloadShape
from sizing.perf.memory import memory_fit
from sizing.perf.replica import ReplicaConfig
from sizing.plan import Rejection
from sizing.planning.candidates import (
    Candidate,
    Evaluated,
    enumerate_candidates,
    instances_for,
    precision_supported,
    replicas_with_spares,
    size_replicas,
)
from sizing.planning.class_shapes import class_goodput, class_weights, class_workload, interactive_classes, mix_goodput

if TYPE_CHECKING:
    from sizing.planning.problem import PlanningProblem

STRATEGIES = ("auto", "scale-up", "scale-out", "mixed")
GoodputScale = Callable[[str, str, str], "tuple[float, str] | None"]
GoodputFn = Callable[..., Goodput]  # sizing.perf.goodput.goodput, or a memoised wrapper of it (sweeps)


@dataclass
class Search:
    """All candidates of one strategy: the feasible ones sized, the rest with reasons."""

    strategy: str
    feasible: list[Evaluated]
    rejections: list[Rejection]

    @property
    def best(self) -> Evaluated | None:
        return min(self.feasible, key=cost_key) if self.feasible else None


def cost_key(e: Evaluated) -> tuple[float, int, int, float, float]:
    """Cheapest first; at the same price and GPU count, the option with fewer risks (as a reviewer would
    choose): fewer nodes to lose, then the larger weights, i.e. the higher precision (fp8 quantized on load
    from the original before a 4-bit community checkpoint), and only then the higher goodput."""
    return (round(e.usd_per_hour, 6), e.gpus, e.instances, -round(e.fit.weights_gib, 3), -e.gp.output_tokens_per_s)


def search(p: PlanningProblem, strategy: str, scale: GoodputScale | None = None) -> Search:
    """Evaluate every candidate allowed by `strategy` (mixed searches everything); `scale`: the user's
    measured goodput scale per (GPU, engine, model), from the calibration overlay."""
    rejections: list[Rejection] = []
    feasible: list[Evaluated] = []
    enum_strategy = "auto" if strategy == "mixed" else strategy
    left = 0
    for cand in enumerate_candidates(p, enum_strategy, rejections):
        if p.time_budget.expired():
            left += 1
            continue
        s = scale(cand.instance.gpu, p.workload.single_engine, p.model.hf_id) if scale else None
        e = evaluate(p, p.purchase, cand, rejections, s[0] if s else 1.0)
        if e is not None:
            feasible.append(e)
    if left:
        p.time_budget.skipped(f"{left} candidate(s) of strategy {strategy} not sized")
    return Search(strategy, feasible, rejections)


def evaluate(p: PlanningProblem, purchase: str, cand: Candidate, rejections: list[Rejection],
             goodput_scale: float = 1.0, goodput_fn: GoodputFn = goodput) -> Evaluated | None:
    """Size one candidate for the problem's demand at `purchase` prices, or record why it is rejected (None).

    `goodput_fn`: sizing.perf.goodput.goodput, or a memoised wrapper of it (sweeps); same result."""
    cat, model, w, hw, region, demand = p.catalog, p.model, p.workload, p.hardware, p.region, p.demand
    inst = cand.instance

    def reject(code: str, detail: str) -> None:
        rejections.append(Rejection(gpu=inst.gpu, instance_type=inst.instance_type, precision=cand.precision,
                                    tensor_parallel=cand.tp, pipeline_parallel=cand.pp, reason=code, detail=detail))

    why = precision_supported(cat, inst.gpu, cand.precision)
    if why:
        reject("unsupported-precision", why)
        return None
    if cat.precision(cand.precision).needs_prequantized_checkpoint and cand.precision not in w.checkpoints:
        reject("needs-checkpoint", f"{cand.precision} needs a pre-quantized checkpoint of {model.hf_id}: set "
               f"llmcap:workload.checkpoints.{cand.precision} to its Hugging Face id")
        return None
    price = cat.price(inst.instance_type, region, purchase)
    if price is None:
        reject("no-price", f"no {purchase} price for {inst.instance_type} in {region} in the catalog")
        return None
    cfg = cand.with_fabric(ReplicaConfig(model=model, gpu=inst.gpu, precision=cand.precision, tp=cand.tp,
                                         pp=cand.pp, kv_cache_dtype=w.kv_cache_dtype, engine=w.single_engine,
                                         interconnect=inst.gpu_interconnect))
    fit = memory_fit(cat, cfg, w.context_tokens, gpu_memory_gib=inst.gpu_memory_gib_each)
    if not fit.fits:
        reject("does-not-fit", fit.reason)
        return None
    if cand.pp > 1 and memory_fit(cat, replace(cfg, pp=cand.pp - 1), w.context_tokens,
                                  gpu_memory_gib=inst.gpu_memory_gib_each).fits:
        return None  # fewer nodes already fit; more stages only add latency and cost
    if len(interactive_classes(w)) >= 2:  # each class on its own prompts and targets (sizing.planning.class_shapes)
        gp = _classes_goodput(p, cfg, goodput_fn)
    else:
        gp = goodput_fn(cat, cfg, WorkloadShape.from_spec(w), w.slo.bound_ms("ttft", "p95"),
                        w.slo.bound_ms("itl", "p95"), mode=demand.mode, targets=w.slo.targets())
    if not gp.feasible:
        reject(gp.reason_code or "misses-itl", gp.reason)
        return None
    tokens = gp.output_tokens_per_s * goodput_scale
    conc = gp.concurrency * goodput_scale
    if tokens <= 0 or conc <= 0:
        reject("misses-itl", "no load meets the SLO")
        return None
    need, _ = size_replicas(demand.output_tokens_per_s, tokens, hw.redundancy,
                            demand.concurrent_users if demand.mode == "closed" else None, conc)
    replicas = replicas_with_spares(cand, need, hw.redundancy)
    instances = instances_for(cand, replicas)
    return Evaluated(cand=cand, fit=fit, gp=gp, usd_per_instance_hour=price.usd_per_hour,
                     price_source=f"{price.source} ({price.as_of})", replicas_for_demand=need, replicas=replicas,
                     instances=instances, usd_per_hour=instances * price.usd_per_hour,
                     goodput_scale=goodput_scale)


def _classes_goodput(p: PlanningProblem, cfg: ReplicaConfig, goodput_fn: GoodputFn) -> Goodput:
    """The goodput per replica of a mix of request classes: each interactive class alone on its own lengths
    and targets; infeasible (with that class's reason) when one class cannot meet its targets on the
    replica, else the classes' harmonic mix (sizing.planning.class_shapes.mix_goodput)."""
    w = p.workload
    parts = []
    for c, f in zip(interactive_classes(w), class_weights(w), strict=True):
        g = class_goodput(p.catalog, cfg, class_workload(w, c), p.demand.mode, goodput_fn)
        if not g.feasible or g.requests_per_s <= 0:
            return replace(g, feasible=False, reason=f"class {c.name}: {g.reason or 'no load meets its targets'}")
        parts.append((g, f, float(c.output_tokens.mean)))
    return mix_goodput(parts)
