"""Assemble the Plan from the planner's search: pools, totals, cost lines, the hosted-API
comparison, alternatives, warnings and assumptions; and the infeasible-workload error."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sizing.cost.money import (
    HOURS_PER_MONTH,
    api_comparison,
    platform_lines,
    usd_per_million_tokens,
    usd_per_month,
)
from sizing.errors import NoFeasiblePlanError
from sizing.perf.binding import binding
from sizing.perf.checkpoint import checkpoint_facts, checkpoint_size
from sizing.perf.cold_start import cold_start
from sizing.perf.load import WorkloadShape, estimate_closed_loop, estimate_open_loop
from sizing.perf.memory import GIB
from sizing.perf.replica import ReplicaConfig
from sizing.perf.weights_mode import weights_mode
from sizing.plan import Alternative, PerReplica, Plan, PlatformPlan, Pool, Totals, VllmSettings
from sizing.planning.allocatable import per_replica_requests
from sizing.planning.candidates import Evaluated, instances_for, replicas_with_spares, size_replicas, strategy_of
from sizing.planning.capacity import (
    capacity_notes,
    commitment_rate,
    purchase_options,
    reservation_for,
    reservation_rate,
    reserved_replicas,
)
from sizing.planning.class_shapes import (
    class_goodput,
    class_load_tokens,
    class_workload,
    interactive_classes,
    tightest_class,
)
from sizing.planning.demand import Demand
from sizing.planning.infeasible import worst_reasons
from sizing.planning.mix import MAX_MINORITY_STEPS, Mix, MixPart, best_mix
from sizing.planning.node_storage import cache_fits_nvme, model_cache_gib, root_volume_gib
from sizing.planning.purchase import cheapest_for_mixed_purchase, split, spot_notes
from sizing.planning.system_nodes import nat_gateway_count, size_system_nodes

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import ModelArch
    from sizing.spec import RequestClass, WorkloadSpec
    from sizing.stack import Stack

def _cfg(model: ModelArch, ev: Evaluated, stack: Stack) -> ReplicaConfig:
    """The replica config, with the batching flags the planner tuned (sizing.planning.batching) if any."""
    w = stack.workload
    t = ev.tuning
    return ev.cand.with_fabric(ReplicaConfig(
        model=model, gpu=ev.cand.instance.gpu, precision=ev.cand.precision, tp=ev.cand.tp,
                         pp=ev.cand.pp, kv_cache_dtype=w.kv_cache_dtype, engine=w.single_engine,
                         interconnect=ev.cand.instance.gpu_interconnect,
                         max_num_seqs=t.max_num_seqs if t else None,
                         max_num_batched_tokens=t.max_num_batched_tokens if t else None))


def sglang_schedule_policy(w: WorkloadSpec) -> str:
    """SGLang's --schedule-policy: `lpm` (longest prefix match first, sglang 0.5.23 arg_groups/fields/schedule.py)
    pays only when requests share prefixes in its radix cache; otherwise `fcfs`, the order the simulation models."""
    return "lpm" if w.prefix_cache_hit_rate > 0 else "fcfs"


def _pool(cat: Catalog, model: ModelArch, stack: Stack, demand: Demand, part: MixPart, purchase: str,
          replicas: int, redundancy_replicas: int, price: float, suffix: str = "") -> Pool:
    ev, w, hw = part.ev, stack.workload, stack.hardware
    c = ev.cand
    inst = c.instance
    instances = instances_for(c, replicas)
    inst_max = math.ceil(instances * (1 + hw.autoscaling_headroom))
    if c.pp > 1:
        inst_max = math.ceil(inst_max / c.pp) * c.pp
    replicas_max = inst_max // c.pp if c.pp > 1 else inst_max * c.replicas_per_instance
    # planned load per replica: this pool's share of the demand over all its replicas
    share_total = max(part.demand_share, 1e-9)
    cfg = _cfg(model, ev, stack)
    shape = WorkloadShape.from_spec(w)
    if demand.mode == "closed" and demand.concurrent_users:
        conc = demand.concurrent_users * share_total / replicas
        at = estimate_closed_loop(cat, cfg, shape, max(int(math.ceil(conc)), 1))
    else:
        rate = (demand.requests_per_s or 0.0) * share_total / replicas
        at = estimate_open_loop(cat, cfg, shape, rate)
    eng = cat.engine(w.single_engine)
    fmt = cat.precision(c.precision)
    bind = binding(cat, cfg, shape, ev.gp, w.slo.targets(), demand.mode)
    served = w.checkpoints.get(c.precision, model.hf_id)
    size = checkpoint_size(cat, served, model, checkpoint_format(cat, stack, c.precision))
    ckpt_gib = size.gib
    cache_gib = model_cache_gib(ckpt_gib, cat)  # the whole checkpoint on every node (aws s3 sync copies the prefix)
    instance_store = stack.deployment.model_cache_on_instance_store
    # GPU memory is filled from the stage's share of the weights (Run:ai streamer from S3, or NVMe); at most
    # one copy per node (sizing.perf.cold_start.weights_mode), so a node packed with several pods streams
    # them, and its pods share the node's S3 throughput (weights_load_gbs_s3 is per node)
    pods = 1 if c.pp > 1 else c.replicas_per_instance
    mode = weights_mode(pods, cache_fits_nvme(inst.local_nvme_gb, cache_gib, instance_store, cat))
    load_s = ckpt_gib / c.pp * GIB / 1e9 / cat.number("weights_load_gbs_s3") * (pods if mode == "stream" else 1)
    # a node's allocatable (nodeadm kube-reserved, eviction, VM overhead) less its DaemonSets, split
    # between the replicas on it (sizing/planning/allocatable.py); a multi-node replica on EFA also hosts the
    # EFA device plugin (node_daemonsets.csv only_on_efa_nodes; infra/kubernetes/efa_plugin.py installs it there)
    on_efa = c.pp > 1 and c.fabric is not None and c.fabric.name.startswith("efa")
    requests = per_replica_requests(cat, inst, c.replicas_per_instance if c.pp == 1 else 1, efa=on_efa)
    tuned = ev.tuning
    bound_code = (tuned.bound_code if tuned and tuned.bound_code else bind.code)
    regime = bind.text.rsplit("; ", 1)[-1]
    # where the simulation found the target that binds, it says so (with the step's regime); else the
    # analytic binding follows the tuning note
    binds = (f"{tuned.binds}; {regime}" if tuned.bound_code and regime.startswith("decode steps") else
             f"{bind.text}; {tuned.binds}") if tuned and tuned.binds else bind.text
    g_lo, g_hi = cat.calibration.goodput_range  # p10/p90 of held-out measured / predicted
    # the tuned batch (or the engine default) within the KV capacity, and never below the planned
    # concurrency (issue 18 item 7: the rendered flag admits the planned load)
    seqs = tuned.max_num_seqs if tuned else eng.default_max_num_seqs
    max_num_seqs = admitting(at.concurrency, min(ev.fit.max_concurrent_sequences, seqs))
    pool = Pool(
        name=f"{inst.instance_type.replace('.', '-')}{suffix}", instance_type=inst.instance_type, gpu=inst.gpu,
        gpus_per_instance=inst.whole_gpus, tensor_parallel=c.tp, pipeline_parallel=c.pp,
        nodes_per_replica=c.pp, inter_node_fabric=c.fabric.name if c.fabric else "",
        inter_node_gbps=c.fabric.gbps if c.fabric else 0.0, replicas=replicas,
        replicas_for_demand=replicas - redundancy_replicas,
        redundancy_replicas=redundancy_replicas, replicas_per_instance=c.replicas_per_instance,
        instances_min=instances, instances_desired=instances, instances_max=inst_max, replicas_max=replicas_max,
        precision=c.precision, purchase=purchase, usd_per_instance_hour=price, usd_per_hour=instances * price,
        demand_share=round(part.demand_share, 6), local_nvme_gb=inst.local_nvme_gb,
        checkpoint_gib=round(ckpt_gib, 3), checkpoint_revision=checkpoint_facts(cat, served).revision,
        model_cache_gib_per_node=round(cache_gib, 3),
        root_volume_gib=root_volume_gib(cache_gib, inst.local_nvme_gb, instance_store, cat),
        cpu_millicores_per_replica=requests[0], memory_mib_per_replica=requests[1],
        goodput_scale=ev.goodput_scale, engine=w.single_engine,
        vllm=VllmSettings(
            model=w.checkpoints.get(c.precision, model.hf_id), served_model_name=model.short_name,
            tensor_parallel_size=c.tp,
            pipeline_parallel_size=c.pp, max_model_len=served_max_model_len(cat, model, w, ev.fit),
            max_num_seqs=max_num_seqs,
            # vLLM refuses a token budget below max_num_seqs (vllm/config/scheduler.py verify_max_model_len)
            max_num_batched_tokens=max(tuned.max_num_batched_tokens if tuned else eng.default_max_num_batched_tokens,
                                       max_num_seqs),
            gpu_memory_utilization=ev.fit.gpu_memory_utilization,
            quantization=fmt.vllm_quantization or None, kv_cache_dtype=w.kv_cache_dtype,
            enable_prefix_caching=True,
            schedule_policy=sglang_schedule_policy(w) if w.single_engine == "sglang" else None),
        per_replica=PerReplica(
            weights_gib_per_gpu=round(ev.fit.weights_gib_per_gpu, 3),
            kv_cache_gib_per_gpu=round(ev.fit.kv_cache_gib_per_gpu, 3),
            max_concurrent_sequences=ev.fit.max_concurrent_sequences,
            goodput_output_tokens_per_s=round(ev.goodput_output_tokens_per_s, 2),
            goodput_output_tokens_per_s_p10=round(ev.goodput_output_tokens_per_s * g_lo, 2),
            goodput_output_tokens_per_s_p90=round(ev.goodput_output_tokens_per_s * g_hi, 2),
            goodput_requests_per_s=round(ev.goodput_requests_per_s, 4), planned_concurrency=round(at.concurrency, 3),
            planned_output_tokens_per_s=round(at.output_tokens_per_s, 2), ttft_p95_ms=round(at.ttft_p95_ms, 2),
            itl_p95_ms=round(at.itl_p95_ms, 3), ttft_ms=round(at.ttft_ms, 2), itl_ms=round(at.itl_ms, 3),
            bound=bound_code, binds=binds, weights_load_s=round(load_s, 1),
            **{f"{m}_{q}_ms": round(at.percentile(m, q), 3) for m, q in _PLANNED_PERCENTILES},
            simulated_at_goodput_ms=dict(tuned.predicted) if tuned else {},
            batching=tuned.describe() if tuned else ""),
    )
    pool.replicas_range = replicas_range(cat, ev, demand, part.demand_share, replicas - redundancy_replicas,
                                         redundancy_replicas)
    pool.per_replica.cold_start_s = round(cold_start(pool, mode, cat).total_s, 1)
    return pool


# predicted percentiles at the planned load beside the p95s and means PerReplica always carried
_PLANNED_PERCENTILES = tuple((m, q) for m in ("ttft", "itl", "tpot", "e2e") for q in ("p50", "p95", "p99")
                             if (m, q) not in (("ttft", "p95"), ("itl", "p95")))


def replicas_range(cat: Catalog, ev: Evaluated, demand: Demand, share: float, replicas_for_demand: int,
                   redundancy_replicas: int) -> list[int]:
    """[fewest, most] replicas (spares included) of a pool if its per-replica goodput were the p90 / the
    p10 of the model's held-out measured ÷ predicted throughput (Calibration.goodput_range): the demand's
    replicas re-sized on that goodput (and on the SLO-meeting concurrency scaled alike), in proportion
    to this pool's share of its candidate's replicas."""
    users = demand.concurrent_users if demand.mode == "closed" else None
    scale = ev.goodput_scale

    def need(s: float) -> int:
        return size_replicas(demand.output_tokens_per_s * share, ev.gp.output_tokens_per_s * scale * s, 0,
                             math.ceil(users * share) if users else None, ev.gp.concurrency * scale * s)[0]

    base = need(1.0)
    lo, hi = cat.calibration.goodput_range
    return [max(1, math.ceil(replicas_for_demand * need(x) / base - 1e-9)) + redundancy_replicas for x in (hi, lo)]


def served_max_model_len(cat: Catalog, model: ModelArch, w: Any, fit: Any) -> int:
    """vLLM --max-model-len (tokens). `llmcap:workload.max_context_tokens` when given; else the model's
    context limit (max_position_embeddings), capped at what one replica's KV cache holds (vLLM refuses to
    start with a max_model_len its KV cache cannot hold one sequence of) less a margin, and never below
    prompt p95 + output p95 (which the planner checked fits). Capacity is still planned at the stated
    mean lengths; a longer prompt is served, not refused with HTTP 400."""
    if w.max_context_tokens:
        return int(w.max_context_tokens)
    kv_tokens = fit.kv_cache_gib_available * GIB / fit.kv_cache_bytes_per_token if fit.kv_cache_bytes_per_token else 0
    step = int(cat.number("max_model_len_step_tokens"))
    cap = int(kv_tokens * cat.number("max_model_len_kv_fraction")) // step * step
    return max(w.context_tokens, min(model.max_position_embeddings, cap))


def checkpoint_format(cat: Catalog, stack: Stack, precision: str) -> Any:
    """The format the downloaded checkpoint is stored in: the 16-bit model when vLLM quantizes on
    load (fp8 without a checkpoint), else the weights as served."""
    fmt = cat.precision(precision)
    on_load = precision not in stack.workload.checkpoints and not fmt.needs_prequantized_checkpoint \
        and fmt.weight_bits < 16
    return cat.precision("bf16") if on_load else fmt


def _model_size_line(cat: Catalog, model: ModelArch) -> str:
    from sizing.perf.checkpoint import model_size_line

    return model_size_line(model, "fp16" if model.torch_dtype == "float16" else "bf16", cat)


def class_served_name(model_name: str, request_class: str) -> str:
    """The model name a dedicated layout's class pool serves: `<served name>-<class>`."""
    return f"{model_name}-{request_class}"


def admitting(concurrency: float, max_num_seqs: int) -> int:
    """--max-num-seqs that admits the planned load: `max_num_seqs` (tuned or the engine default, within the
    KV capacity), never below the planned requests in flight per replica (issue 18 item 7)."""
    return max(1, math.ceil(concurrency - 1e-9), max_num_seqs)


def _slug(name: str) -> str:
    """A class name as a pool-name suffix (DNS-label characters: lowercase letters, digits, '-')."""
    return "".join(ch if ch.isalnum() and ch.isascii() else "-" for ch in name.lower()).strip("-") or "class"


def _class_pools(cat: Catalog, model: ModelArch, stack: Stack, demand: Demand, mix: Mix, pools: list[Pool],
                 by_class: dict[str, int], warnings: list[str]) -> list[Pool]:
    """A dedicated layout: one pool per request class, each with its class's replicas for demand (plus the
    stack's spares in each pool: one pool cannot stand in for another's failed replica), serving the model
    as `<name>-<class>` (class_served_name); the first class of the stack (its default) also answers the
    plain name (on vLLM, which takes several names), so a client that names no class still gets an answer.
    One instance type on one purchase only: a mixed strategy, a mixed purchase or a reservation split a pool
    already, and then the classes share it (a warning says so)."""
    hw = stack.hardware
    if len(mix.parts) != 1 or len(pools) != 1 or hw.purchase == "mixed" or pools[0].capacity_reservation_id:
        warnings.append("the replay found a pool per class cheaper, but one instance type on one purchase is needed "
                        "for per-class pools (no mixed strategy, mixed purchase or reservation); the classes share "
                        "one pool, sized as the dedicated fleet")
        return pools
    ev = mix.parts[0].ev
    total = max(sum(by_class.values()), 1)
    default = next((c.name for c in stack.workload.request_classes if c.name in by_class), next(iter(by_class)))
    own = {c.name: c for c in interactive_classes(stack.workload)}
    own_tokens = {n: class_load_tokens(stack.workload, c) for n, c in own.items()}
    own_share = ({n: t / sum(own_tokens.values()) for n, t in own_tokens.items()}
                 if sum(own_tokens.values()) > 0 and set(own) == set(by_class) else {})
    out: list[Pool] = []
    seen: set[str] = set()
    for k, (name, n) in enumerate(by_class.items()):
        replicas = replicas_with_spares(ev.cand, n, hw.redundancy)
        # its share of the output demand: the class's own where the stack gives it (a replica count is not a
        # load share: rag's few long prompts take most replicas, chat's many short ones most tokens)
        share = own_share.get(name, n / total)
        part = MixPart(ev, instances_for(ev.cand, replicas), replicas, share)
        suffix = "-" + _slug(name)
        if pools[0].name + suffix in seen:
            suffix += f"-{k}"
        seen.add(pools[0].name + suffix)
        pool = _priced_pool(cat, model, stack, demand, part, hw.purchase, replicas, replicas - n, warnings, suffix)
        if name in own:  # its figures: the class alone on its pool, against its own targets
            pool.per_replica = _class_per_replica(cat, model, stack, part, own[name], replicas, replicas - n, suffix)
            # the rendered flag admits the class's planned load, as _priced_pool's does the mix's (issue 18 item
            # 7; infra/fit/rules.py max-num-seqs-below-concurrency): chat's short requests put more in flight
            # per replica than the mix it was tuned on; vLLM refuses a token budget below max_num_seqs
            pool.vllm.max_num_seqs = admitting(pool.per_replica.planned_concurrency, pool.vllm.max_num_seqs)
            pool.vllm.max_num_batched_tokens = max(pool.vllm.max_num_batched_tokens, pool.vllm.max_num_seqs)
        pool.request_class = name
        plain = pool.vllm.served_model_name
        pool.vllm.served_model_name = class_served_name(plain, name)
        # SGLang's --served-model-name takes one value (infra/data/sglang_flags.yaml, from its parser: no nargs)
        pool.vllm.served_model_aliases = [plain] if name == default and pool.engine != "sglang" else []
        out.append(pool)
    return out


def _classes_composite(cat: Catalog, model: ModelArch, stack: Stack, mix: Mix, pools: list[Pool]) -> list[Pool]:
    """Pools that serve every request class of the stack, with their latency figures per class: on each
    metric, the class that sets the stack's tightest target on it (the pool's target line is that class's),
    else the slowest class, each class alone at its share of the pool's load (_class_per_replica). The mix's
    mean shape (the classes' weighted lengths against the tightest targets) is what the pre-search no longer
    sizes with (sizing.planning.class_shapes), and at it a replica sized for the classes may find no steady
    state. A replay, when the plan has one, replaces these (sizing.planning.class_results)."""
    own = interactive_classes(stack.workload)
    if len(own) < 2:
        return pools
    out = []
    for pool in pools:
        part = next((pt for pt in mix.parts if pt.ev.cand.instance.instance_type == pool.instance_type
                     and pt.ev.cand.tp == pool.tensor_parallel and pt.ev.cand.pp == pool.pipeline_parallel
                     and pt.ev.cand.precision == pool.precision), None)
        if part is None or pool.request_class:
            out.append(pool)
            continue
        per = {c.name: _class_per_replica(cat, model, stack, part, c, pool.replicas, pool.redundancy_replicas,
                                          "", share=pool.demand_share) for c in own}
        upd: dict[str, object] = {}
        for m in ("ttft", "itl", "tpot", "e2e"):
            name = tightest_class(own, m) or max(per, key=lambda n: per[n].percentile(m, "p95"))
            for q in ("p50", "p95", "p99"):
                upd[f"{m}_{q}_ms"] = getattr(per[name], f"{m}_{q}_ms")
            if m in ("ttft", "itl"):
                upd[f"{m}_ms"] = getattr(per[name], f"{m}_ms")
        out.append(pool.model_copy(update={"per_replica": pool.per_replica.model_copy(update=upd)}))
    return out


def _class_per_replica(cat: Catalog, model: ModelArch, stack: Stack, part: MixPart, c: RequestClass,
                       replicas: int, red: int, suffix: str, share: float = 1.0) -> PerReplica:
    """A dedicated pool's per-replica figures: its class alone (sizing.planning.class_shapes.class_workload:
    its lengths, targets and load) on the pool's replicas, so the pool is judged on its own requests (its
    flags, context length and names stay the stack's: any request may reach it by the plain name)."""
    from sizing.planning.demand import demand_of

    wc = class_workload(stack.workload, c)
    dem = demand_of(wc)
    ev = part.ev
    from sizing.perf.goodput import goodput

    g = class_goodput(cat, _cfg(model, ev, stack), wc, dem.mode, goodput)
    one = MixPart(replace(ev, gp=g), part.instances, replicas, share)
    return _priced_pool(cat, model, replace(stack, workload=wc), dem, one, stack.hardware.purchase, replicas, red,
                        [], suffix).per_replica


def _priced_pool(cat: Catalog, model: ModelArch, stack: Stack, demand: Demand, part: MixPart, purchase: str,
                 replicas: int, red: int, warnings: list[str], suffix: str = "") -> Pool:
    """A pool on `purchase`, on-demand instances paid at the stack's commitment rate."""
    ev = part.ev
    t = ev.cand.instance.instance_type
    if purchase != "on-demand":
        return _pool(cat, model, stack, demand, part, purchase, replicas, red, ev.usd_per_instance_hour, suffix)
    rate = commitment_rate(cat, t, stack.region, stack.hardware.commitment, ev.usd_per_instance_hour)
    if rate.warning:
        warnings.append(rate.warning)
    pool = _pool(cat, model, stack, demand, part, purchase, replicas, red, rate.usd_per_hour, suffix)
    pool.rate_basis = rate.basis if rate.basis != "on-demand" else ""
    return pool


def _reserved_pools(cat: Catalog, model: ModelArch, stack: Stack, demand: Demand, part: MixPart, red: int,
                    warnings: list[str]) -> list[Pool]:
    """The part's replicas on its reservation first (a node group that cannot grow past it), the rest
    in a second pool on `purchase`."""
    ev, hw = part.ev, stack.hardware
    t = ev.cand.instance.instance_type
    res = reservation_for(hw, t)
    assert res is not None  # the caller found it
    held = reserved_replicas(ev, res, part.replicas)
    if held == 0:
        warnings.append(f"{res.kind} {res.id}: its {res.count} {t} instances hold no whole replica "
                        f"({ev.cand.pp} nodes each); the pool runs on {hw.purchase}")
        return [_priced_pool(cat, model, stack, demand, part, hw.purchase, part.replicas, red, warnings)]
    rate = reservation_rate(cat, res, stack.region, ev.usd_per_instance_hour)
    if rate.warning:
        warnings.append(rate.warning)
    suffix = "-cb" if res.kind == "capacity-block" else "-odcr"
    on_res = replace(part, demand_share=part.demand_share * held / part.replicas)
    pool = _pool(cat, model, stack, demand, on_res, res.kind, held, min(red, held - 1) if held > 1 else 0,
                 rate.usd_per_hour, suffix)
    # a reservation holds `count` instances: the node group cannot scale past it
    inst_max = min(pool.instances_max, res.count)
    pool = pool.model_copy(update={
        "instances_max": inst_max,
        "replicas_max": inst_max // ev.cand.pp if ev.cand.pp > 1 else inst_max * ev.cand.replicas_per_instance,
        "rate_basis": rate.basis if rate.basis != res.kind else "",
        "capacity_reservation_id": res.id, "availability_zone_id": res.availability_zone_id,
        "capacity_ends": res.end.isoformat() if res.end else None})
    rest = part.replicas - held
    if rest == 0:
        return [pool]
    rest_part = replace(part, demand_share=part.demand_share * rest / part.replicas)
    return [pool, _priced_pool(cat, model, stack, demand, rest_part, hw.purchase, rest,
                               max(0, red - pool.redundancy_replicas) if rest > 1 else 0, warnings)]


def _pools_for_purchase(cat: Catalog, model: ModelArch, stack: Stack, demand: Demand, mix: Mix,
                        warnings: list[str]) -> list[Pool]:
    hw = stack.hardware
    strategy_single = len(mix.parts) == 1
    pools: list[Pool] = []
    for i, part in enumerate(mix.parts):
        ev = part.ev
        red = (part.replicas - ev.replicas_for_demand if strategy_single else hw.redundancy) if i == 0 else 0
        red = max(0, min(red, part.replicas - 1)) if part.replicas > 1 else 0
        t, region = ev.cand.instance.instance_type, stack.region
        res = reservation_for(hw, t)
        if res is not None:  # the reservation first, the rest on purchase
            pools.extend(_reserved_pools(cat, model, stack, demand, part, red, warnings))
            continue
        if hw.purchase != "mixed":
            pools.append(_priced_pool(cat, model, stack, demand, part, hw.purchase, part.replicas, red, warnings))
            continue
        sp = split(cat, ev, part.replicas, region, hw.spot_on_demand_floor)
        od_replicas, spot_replicas = sp.on_demand_replicas, sp.spot_replicas
        od_part = replace(part, demand_share=part.demand_share * od_replicas / part.replicas)
        pools.append(_pool(cat, model, stack, demand, od_part, "on-demand", od_replicas,
                           min(red, od_replicas - 1), ev.usd_per_instance_hour, "-od"))
        if spot_replicas == 0:
            warnings.append(f"purchase mixed: all {part.replicas} replicas of {t} on-demand ({sp.why_no_spot})")
        else:
            assert sp.spot_usd_per_instance_hour is not None
            spot_part = replace(part, demand_share=part.demand_share * spot_replicas / part.replicas)
            pools.append(_pool(cat, model, stack, demand, spot_part, "spot", spot_replicas, 0,
                               sp.spot_usd_per_instance_hour, "-spot"))
    return pools


def _alternatives(chosen_usd_h: float, chosen_key: tuple[str, str, int, int] | None, main: Any,
                  others: dict[str, Any], strategy: str) -> list[Alternative]:
    seen: dict[tuple[str, str], Alternative] = {}
    searches = [main] + list(others.values())
    for s in searches:
        for ev in sorted(s.feasible, key=lambda e: e.usd_per_hour):
            strat = strategy_of(ev.cand.instance)
            key = (strat, ev.cand.instance.gpu)
            if key in seen:
                continue
            c = ev.cand
            is_chosen = chosen_key == (c.instance.instance_type, c.precision, c.tp, c.pp)
            delta = usd_per_month(ev.usd_per_hour - chosen_usd_h)
            why = "chosen" if is_chosen else (
                f"costs ${delta:,.0f}/month more (+{delta / usd_per_month(chosen_usd_h):.0%})" if delta > 0.005
                else "same cost; the chosen plan has fewer GPUs or more headroom")
            seen[key] = Alternative(
                strategy=strat, gpu=c.instance.gpu, instance_type=c.instance.instance_type, precision=c.precision,
                tensor_parallel=c.tp, feasible=True, gpus=ev.gpus, instances=ev.instances,
                usd_per_month=round(usd_per_month(ev.usd_per_hour), 2),
                usd_per_million_output_tokens=None, why_not_chosen=why)
    for s in searches:
        for gpu, (code, detail, inst, prec, tp) in worst_reasons(s.rejections).items():
            strat = "scale-up" if inst.startswith("p") else "scale-out"
            if (strat, gpu) in seen:
                continue
            seen[(strat, gpu)] = Alternative(strategy=strat, gpu=gpu, instance_type=inst, precision=prec,
                                             tensor_parallel=tp, feasible=False, why_not_chosen=f"{code}: {detail}")
    return sorted(seen.values(), key=lambda a: (not a.feasible, a.usd_per_month or 0.0))


def build_plan(cat: Catalog, model: ModelArch, stack: Stack, strategy: str, main: Any, others: dict[str, Any],
               demand: Demand, scale: Any, replicas_by_class: dict[str, int] | None = None,
               replayed: bool = False) -> Plan:
    """The plan of the chosen candidate. `replicas_by_class` (a dedicated layout, sizing.planning.fleet): each
    request class's replicas for its demand, which become one pool per class (_class_pools). `replayed`: the
    replicas for demand were found by replaying the requests (sizing.planning.fleet), which showed them
    carrying the whole demand within every class's targets."""
    w, hw = stack.workload, stack.hardware
    warnings: list[str] = []
    best: Evaluated = main.best
    if hw.purchase == "mixed" and strategy != "mixed":  # the candidate whose on-demand/spot split costs least
        best = cheapest_for_mixed_purchase(cat, main.feasible, stack.region, hw.spot_on_demand_floor)
    if strategy == "mixed":
        mix = best_mix(main.feasible, hw.redundancy)
        assert mix is not None  # main.feasible is non-empty here
        if len(mix.parts) == 1:
            warnings.append("mixed: no two-pool mix is cheaper than the best single pool")
        if not mix.exact:
            warnings.append(f"mixed: the split search stopped after {MAX_MINORITY_STEPS:,} steps of the smaller pool "
                            "per pair; a split with more of it was not examined (its saving is at most rounding)")
    else:
        mix = Mix((MixPart(best, best.instances, best.replicas, 1.0),), best.usd_per_hour)
    pools = _classes_composite(cat, model, stack, mix, _pools_for_purchase(cat, model, stack, demand, mix, warnings))
    if replicas_by_class:
        pools = _class_pools(cat, model, stack, demand, mix, pools, replicas_by_class, warnings)
    nodes_max = sum(p.instances_max for p in pools)
    limit = int(cat.number("kubernetes_max_nodes_per_cluster"))
    if nodes_max > limit:
        raise NoFeasiblePlanError(
            f"the plan needs {nodes_max:,} GPU nodes at its autoscaling maximum",
            [f"the plan needs {nodes_max:,} GPU nodes "
             f"({', '.join(f'{x.instances_max:,} {x.instance_type}' for x in pools)}) at its autoscaling maximum; "
             f"one Kubernetes cluster supports at most {limit:,} nodes "
             "(kubernetes.io large-cluster limits): lower the traffic in llmcap:workload.traffic, or split it over "
             "several stacks"])
    warnings.extend(spot_notes(cat, stack.region, [(p.instance_type, p.purchase, p.replicas) for p in pools]))
    warnings.extend(capacity_notes(hw, [(p.instance_type, p.purchase, p.instances_desired, p.usd_per_instance_hour)
                                        for p in pools if p.capacity_reservation_id]))
    usd_h = sum(p.usd_per_hour for p in pools)
    usd_h_max = sum(p.instances_max * p.usd_per_instance_hour for p in pools)
    usd_h_min = sum(p.instances_min * p.usd_per_instance_hour for p in pools)
    # the same pools re-sized at the p90 and the p10 of the held-out goodput error (Pool.replicas_range)
    inst_range = [[p.replicas_range[i] * p.nodes_per_replica if p.nodes_per_replica > 1
                   else math.ceil(p.replicas_range[i] / p.replicas_per_instance) for p in pools] for i in (0, 1)]
    gpus_range = [sum(n * p.gpus_per_instance for n, p in zip(ns, pools, strict=True)) for ns in inst_range]
    usd_range = [round(usd_per_month(sum(n * p.usd_per_instance_hour for n, p in zip(ns, pools, strict=True))), 2)
                 for ns in inst_range]
    capacity = sum(p.replicas * p.per_replica.goodput_output_tokens_per_s for p in pools)
    if replayed:  # the replay carried the demand on the replicas for demand: at least that, spares included
        for_demand = max(sum(p.replicas_for_demand for p in pools), 1)
        capacity = max(capacity, demand.output_tokens_per_s * sum(p.replicas for p in pools) / for_demand)
    lead = pools[0]
    # requests/s of the demand the plan is sized on: given, or output demand ÷ output tokens per request
    rps = demand.requests_per_s or demand.output_tokens_per_s / w.output_tokens.mean
    in_tps = rps * w.prompt_tokens.mean * (1 - 0.0)
    out_tps = demand.output_tokens_per_s
    d = stack.deployment
    system_type = d.system_node_instance_type or cat.setting("system_node_instance_type")
    system = size_system_nodes(cat, pools, system_type, stack.region, d.system_node_count)
    offered = {p.instance_type: cat.offered_azs(p.instance_type, stack.region) for p in pools}
    nat = 0 if d.vpc_id else nat_gateway_count(offered, d.nat_gateways, int(cat.number("max_azs")))
    gpu_nodes = sum(p.instances_desired for p in pools)
    plat = platform_lines(cat, stack.region, max(p.checkpoint_gib for p in pools),
                          sum(p.root_volume_gib * p.instances_desired for p in pools)
                          + system.root_volume_gib * system.desired, system_type, system.desired, nat,
                          nodes_total=gpu_nodes + system.desired)
    plat_month = sum(line.usd_per_month or 0.0 for line in plat)
    unpriced = [line.name for line in plat if line.usd_per_month is None]
    if unpriced:
        warnings.append(f"platform not priced in {stack.region} (no catalog price there): {', '.join(unpriced)}; "
                        f"the all-in cost excludes {'them' if len(unpriced) > 1 else 'it'} "
                        f"(llmcap catalog refresh --region {stack.region} --platform prices them from the AWS "
                        "Price List)")
    gpu_lines = [_gpu_line(p) for p in pools]
    month = usd_per_month(usd_h)
    # the API's prompt cache bills the reused share of input at its cache-read price: the share the plan is
    # sized with (a trace's replayed share replaces it in class_results.attach)
    apis, api_note = api_comparison(cat, model.hf_id, model.params_active_b, model.params_total_b, in_tps, out_tps,
                                    month + plat_month, w.prefix_cache_hit_rate)
    if api_note:
        warnings.append(api_note)
    totals = Totals(
        gpus=sum(p.instances_desired * p.gpus_per_instance for p in pools),
        instances=sum(p.instances_desired for p in pools), usd_per_hour=round(usd_h, 4),
        usd_per_month=round(month, 2), usd_per_month_min=round(usd_per_month(usd_h_min), 2),
        usd_per_month_max=round(usd_per_month(usd_h_max), 2), gpus_range=gpus_range, usd_per_month_range=usd_range,
        platform_usd_per_month=round(plat_month, 2),
        all_in_usd_per_month=round(month + plat_month, 2),
        usd_per_million_output_tokens=round(usd_per_million_tokens(usd_h, out_tps), 4),
        usd_per_million_output_tokens_at_capacity=round(usd_per_million_tokens(usd_h, capacity), 4),
        all_in_usd_per_million_output_tokens=round(
            usd_per_million_tokens(usd_h + plat_month / HOURS_PER_MONTH, out_tps), 4),
        utilization=round(out_tps / capacity, 4) if capacity else 0.0,
        demand_output_tokens_per_s=round(out_tps, 2), capacity_output_tokens_per_s=round(capacity, 2))
    for p in pools:
        if p.vllm.model != model.hf_id:
            warnings.append(f"{p.name}: serves the {p.precision} checkpoint {p.vllm.model} of {model.hf_id}; "
                            "its quality is the checkpoint's, not the base model's")
        if p.checkpoint_revision is None:
            warnings.append(f"{p.name}: the checkpoint {p.vllm.model} has no pinned Hugging Face revision "
                            "(sizing/data/checkpoints.csv); the copy Job downloads the hub's current main")
        if p.nodes_per_replica > 1:
            fabric = {"efa": f"over EFA (NCCL over aws-ofi-nccl), {p.inter_node_gbps:,.0f} Gbps per node",
                      "efa-sockets": f"over TCP sockets, {p.inter_node_gbps:,.0f} Gbps per node: EFA is attached but "
                                     f"the {p.engine} image has no aws-ofi-nccl (sizing/data/nccl_net_plugins.csv), "
                                     "so NCCL cannot use it",
                      "ena": f"over ENA (NCCL over TCP sockets), {p.inter_node_gbps:,.0f} Gbps per node: no EFA on "
                             f"{p.instance_type}"}.get(p.inter_node_fabric, "over the network")
            warnings.append(f"{p.name}: each replica spans {p.nodes_per_replica} nodes (pipeline parallel "
                            f"{fabric}); deployed as a LeaderWorkerSet")
    assumptions = [
        f"demand: {demand.formula}",
        "replicas = ceil(demand ÷ goodput per replica at the SLO) + redundancy "
        f"({hw.redundancy}); concurrent users also bound replicas by the SLO-meeting concurrency",
        f"$/month = $/hour × {HOURS_PER_MONTH:g} h; $/1M tokens = $/hour ÷ (output tokens/s × 3,600) × 1e6",
        f"engine: {w.single_engine}; performance model calibrated on published measurements "
        "(sizing/data/perf_calibration.*)",
        *cat.as_of_lines(stack.region),
        _model_size_line(cat, model),
    ]
    if scale is not None:
        note = scale(lead.gpu, w.single_engine, model.hf_id)
        if note:
            assumptions.append(f"calibration overlay: {note[1]}")
    if cat.overridden:
        assumptions.append(f"catalog overrides from {cat.directory}: {', '.join(cat.overridden)}")
    if stack.budget_usd_month is not None and totals.all_in_usd_per_month > stack.budget_usd_month:
        warnings.append(f"all-in ${totals.all_in_usd_per_month:,.0f}/month is above llmcap:budget_usd_month "
                        f"${stack.budget_usd_month:,.0f}")
    chosen_key = (best.cand.instance.instance_type, best.cand.precision, best.cand.tp, best.cand.pp)
    return Plan(
        stack=stack.name, region=stack.region, model=model.hf_id, strategy=strategy, purchase=hw.purchase,
        workload=w, hardware=hw,
        platform=PlatformPlan(system_nodes=system, nat_gateways=nat),
        demand={**demand.as_dict(), "requests_per_s_planned": round(rps, 4),
                "input_tokens_per_s": round(in_tps, 2)},
        pools=pools, totals=totals, cost_lines=gpu_lines + plat, api_comparison=apis,
        purchase_options=purchase_options(cat, stack.region, _fleet(pools), out_tps),
        alternatives=_alternatives(best.usd_per_hour, chosen_key, main, others, strategy),
        rejections=main.rejections, warnings=warnings, assumptions=assumptions,
        budget_usd_month=stack.budget_usd_month)


def _fleet(pools: list[Pool]) -> dict[str, int]:
    """Desired instances per instance type over the pools."""
    out: dict[str, int] = {}
    for p in pools:
        out[p.instance_type] = out.get(p.instance_type, 0) + p.instances_desired
    return out


def _gpu_line(p: Pool) -> Any:
    from sizing.plan import CostLine

    how = p.purchase + (f" at the {p.rate_basis} rate" if p.rate_basis else "")
    return CostLine(name=f"GPU instances ({how}, {p.instance_type})", quantity=p.instances_desired,
                    unit="instances", usd_per_month=round(usd_per_month(p.usd_per_hour), 2),
                    source="prices.csv" + (f"; {p.capacity_reservation_id}" if p.capacity_reservation_id else ""))
