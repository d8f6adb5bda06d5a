"""`llmcap estimate`: memory (and, with the performance model, load) figures for one replica."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from sizing.catalog.lookup import Catalog, load_catalog
from sizing.cli.common import TableOrJson, console, emit_json, guarded
from sizing.errors import NoFeasiblePlanError, SpecError
from sizing.perf.memory import memory_fit
from sizing.perf.replica import ReplicaConfig

if TYPE_CHECKING:
    from sizing.perf.query import EstimateQuery


def print_table(fig: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title=f"{fig['model']} on {fig['tp'] * fig['pp']}× {fig['gpu']} ({fig['precision']})")
    t.add_column("figure")
    t.add_column("value", justify="right")
    for k, v in fig.items():
        if k in ("model", "gpu", "precision", "why", "goodput_reason", "binds"):  # in the title, or lines below
            continue
        t.add_row(k, f"{v:,.3f}" if isinstance(v, float) else str(v))
    console().print(t)
    if fig.get("why"):
        console().print(f"bound: {fig['bound']}: {fig['why']}")
    if fig.get("goodput_reason"):
        console().print(f"goodput: {fig['goodput_reason']}")
    if fig.get("binds") and fig.get("goodput_feasible"):
        console().print(f"binds: {fig['binds']}")


def infeasible_line(fig: dict[str, Any], q: EstimateQuery, cat: Catalog) -> str | None:
    """The one-line cause when this replica cannot serve at all (exit 3, as `plan`), else None."""
    if not fig["fits"]:
        fix = _fitting_tp(fig, q, cat)
        return f"weights do not fit: {fig['fit_reason']}" + (f"; --tp {fix} fits" if fix else "")
    if fig.get("goodput_feasible") is False:
        return str(fig.get("binds") or fig.get("goodput_reason"))
    return None


def _fitting_tp(fig: dict[str, Any], q: EstimateQuery, cat: Catalog) -> int | None:
    """The smallest larger tensor parallelism at which the weights fit (the same GPU, precision, context)."""
    m = cat.model(q.model)
    for tp in (2, 4, 8):
        cfg = ReplicaConfig(model=m, gpu=fig["gpu"], precision=q.precision, tp=tp, pp=q.pp,
                            kv_cache_dtype=q.kv_cache_dtype, engine=q.engine)
        if tp > q.tp and m.num_attention_heads % tp == 0 and memory_fit(cat, cfg, fig["context_tokens"]).fits:
            return tp
    return None


@guarded
def estimate(
    model: str | None = typer.Option(None, "--model", help="catalog name, HF id, or path to a config.json"),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU name, e.g. L4, A100-80GB, H100-SXM"),
    tp: int = typer.Option(1, "--tp", help="tensor-parallel GPUs per replica"),
    pp: int = typer.Option(1, "--pp", help="pipeline-parallel stages per replica"),
    precision: str = typer.Option("bf16", "--precision", help="bf16|fp16|fp8|int8|int4-awq|int4-gptq|fp4"),
    kv_cache_dtype: str = typer.Option("auto", "--kv-cache-dtype", help="auto|fp8"),
    prompt_tokens: int = typer.Option(1024, "--prompt-tokens"),
    output_tokens: int = typer.Option(256, "--output-tokens"),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    catalog: Path | None = typer.Option(None, "--catalog"),
    engine: str = typer.Option("vllm", "--engine",
                               help="vllm|sglang|tensorrt-llm (each has its own fitted efficiency)"),
    concurrency: str | None = typer.Option(None, "--concurrency",
                                           help="requests in flight (closed loop), or 'max' for the largest batch"),
    rate: float | None = typer.Option(None, "--rate", help="Poisson arrival rate, requests/s (open loop)"),
    ttft_p95_ms: float | None = typer.Option(None, "--ttft-p95-ms", help="TTFT p95 target, ms (goodput)"),
    itl_p95_ms: float | None = typer.Option(None, "--itl-p95-ms", help="ITL p95 target, ms (goodput)"),
    simulate: bool = typer.Option(False, "--simulate",
                                  help="also run the step-level simulation at the same load (sim_* keys)"),
    max_num_batched_tokens: int | None = typer.Option(None, "--max-num-batched-tokens",
                                                      help="vLLM chunked-prefill token budget (default: engine's)"),
    max_num_seqs: int | None = typer.Option(None, "--max-num-seqs", help="vLLM batch limit (default: engine's)"),
    batch: Path | None = typer.Option(None, "--batch",
                                      help="JSONL file, one query per line; prints one JSON line each"),
) -> None:
    """Memory and load figures for one replica: weights, KV cache, max sequences, throughput, TTFT and
    ITL at a load, goodput at an SLO, and which bound dominates."""
    from sizing.perf.query import EstimateQuery, batch_lines, figures

    cat = load_catalog(catalog)
    if batch is not None:
        for row in batch_lines(batch, cat):
            typer.echo(json.dumps(row))
        return
    if model is None or gpu is None:
        raise SpecError("--model and --gpu are required (or --batch FILE.jsonl)")
    q = EstimateQuery.from_flags(
        model=model, gpu=gpu, tp=tp, pp=pp, precision=precision, kv_cache_dtype=kv_cache_dtype, engine=engine,
        prompt_tokens=prompt_tokens, output_tokens=output_tokens, concurrency=concurrency, rate=rate,
        ttft_p95_ms=ttft_p95_ms, itl_p95_ms=itl_p95_ms, simulate=simulate,
        max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs)
    fig = figures(cat, q)
    if fmt == TableOrJson.json:
        emit_json(fig)
    else:
        print_table(fig)
    cause = infeasible_line(fig, q, cat)
    if cause:
        raise NoFeasiblePlanError(cause, [cause])
