"""The memory and throughput arithmetic behind a plan's first pool, as the design document shows it:
the formulas with the model's numbers. Every figure is the Plan's own or comes from the same
functions the planner called (sizing.perf.memory), so the document restates the plan, never re-derives it.

Owns: `Arithmetic` (one pool's M_weight, M_KV per token and per request, M_total at the planned
concurrency, goodput, replicas). Must not import matplotlib, pulumi, boto3 or the report layer.

Units: GiB (2^30 bytes) for memory, bytes for KV per token, output tokens/s for goodput and demand.
Scope is named in each field: per GPU, per replica (tp × pp GPUs) or total.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from sizing.perf.memory import (
    GIB,
    kv_cache_bytes_per_sequence,
    kv_cache_bytes_per_token,
    kv_dtype_bytes,
    weight_bytes_per_replica,
)

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.plan import Plan


class Arithmetic(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pool: str
    gpu: str
    precision: str
    gpus_per_replica: int
    params_b: float  # total parameters, billions
    bytes_per_param: float  # the precision's weight bytes per parameter (16-bit embeddings kept)
    weights_gib_per_replica: float  # M_weight
    weights_gib_per_gpu: float  # the plan's figure
    num_layers: int
    num_kv_heads: int
    head_dim: int
    kv_dtype_bytes: float
    kv_bytes_per_token_per_replica: float  # M_KV per token = 2 × layers × kv_heads × head_dim × bytes
    tokens_per_request: int  # prompt + output (means)
    kv_gib_per_request_per_replica: float
    planned_concurrency_per_replica: float
    kv_gib_at_planned_concurrency_per_replica: float
    m_total_gib_per_gpu: float  # weights + KV at the planned concurrency, per GPU (even shards)
    kv_cache_gib_per_gpu: float  # the KV budget the engine gets (the plan's figure)
    gpu_memory_gib: float  # usable memory of one GPU (catalog)
    goodput_output_tokens_per_s_per_replica: float
    goodput_range_per_replica: tuple[float, float]  # p10, p90
    demand_output_tokens_per_s: float  # total
    replicas_for_demand: int
    redundancy_replicas: int
    replicas: int
    demand_formula: str
    sources: dict[str, str]


def arithmetic(plan: Plan, cat: Catalog) -> Arithmetic:
    """The arithmetic of the plan's first pool (the one that carries the demand in a one-pool plan)."""
    from sizing.catalog.weights_source import workload_model

    p = plan.pools[0]
    w = plan.workload
    model = workload_model(cat, w.model, w.weights_source)
    fmt = cat.precision(p.precision)
    kvb = kv_dtype_bytes(p.vllm.kv_cache_dtype, fmt)
    n = p.tensor_parallel * p.pipeline_parallel
    weights = weight_bytes_per_replica(model, fmt) / GIB
    head_dim = model.head_dim or model.hidden_size // model.num_attention_heads
    tokens = int(round(w.prompt_tokens.mean + w.output_tokens.mean))
    per_req = kv_cache_bytes_per_sequence(model, tokens, kvb) / GIB
    conc = p.per_replica.planned_concurrency
    at_planned = per_req * conc
    return Arithmetic(
        pool=p.name, gpu=p.gpu, precision=p.precision, gpus_per_replica=n, params_b=model.params_total_b,
        bytes_per_param=fmt.bytes_per_param, weights_gib_per_replica=round(weights, 2),
        weights_gib_per_gpu=p.per_replica.weights_gib_per_gpu, num_layers=model.kv_layers,  # layers with KV
        num_kv_heads=model.num_kv_heads, head_dim=head_dim, kv_dtype_bytes=kvb,
        kv_bytes_per_token_per_replica=kv_cache_bytes_per_token(model, kvb), tokens_per_request=tokens,
        kv_gib_per_request_per_replica=round(per_req, 4), planned_concurrency_per_replica=conc,
        kv_gib_at_planned_concurrency_per_replica=round(at_planned, 2),
        m_total_gib_per_gpu=round(p.per_replica.weights_gib_per_gpu + at_planned / n, 2),
        kv_cache_gib_per_gpu=p.per_replica.kv_cache_gib_per_gpu,
        gpu_memory_gib=round(cat.gpu_usable_memory_gib(p.gpu), 2),
        goodput_output_tokens_per_s_per_replica=p.per_replica.goodput_output_tokens_per_s,
        goodput_range_per_replica=(p.per_replica.goodput_output_tokens_per_s_p10,
                                   p.per_replica.goodput_output_tokens_per_s_p90),
        demand_output_tokens_per_s=plan.totals.demand_output_tokens_per_s,
        replicas_for_demand=p.replicas_for_demand, redundancy_replicas=p.redundancy_replicas, replicas=p.replicas,
        demand_formula=str(plan.demand.get("formula", "")),
        sources={
            "model": f"{model.hf_id}: config.json architecture ({model.family})",
            "precision": f"precisions.csv row {p.precision}",
            "memory": "sizing/perf/memory.py (the planner's memory_fit)",
            "goodput": "sizing/perf/goodput.py at the stack's SLO; range from perf_calibration.json goodput_range",
            "replicas": "sizing/planning/candidates.py size_replicas",
        })
