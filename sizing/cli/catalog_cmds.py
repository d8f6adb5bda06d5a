"""`llmcap models`, `llmcap gpus`, `llmcap instances`: catalog listings."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import typer

from sizing.catalog.lookup import load_catalog
from sizing.cli.common import TableOrJson, console, emit_json, guarded
from sizing.stack import DEFAULT_REGION

CatalogOpt = typer.Option(None, "--catalog", help="catalog directory (default: bundled, or the user cache)")


@guarded
def models(fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"), catalog: Path | None = CatalogOpt) -> None:
    """List the model architectures in the catalog."""
    cat = load_catalog(catalog)
    rows = list(cat.models.values())
    if fmt == TableOrJson.json:
        emit_json([asdict(m) for m in rows])
        return
    from rich.table import Table

    t = Table(title="Models")
    for c in ("hf_id", "short name", "params B (active)", "layers", "kv heads", "attention", "max ctx"):
        t.add_column(c)
    for m in rows:
        act = f"{m.params_total_b:g}" + (f" ({m.params_active_b:g})" if m.is_moe else "")
        t.add_row(m.hf_id, m.short_name, act, str(m.num_layers), str(m.num_kv_heads), m.attention_kind,
                  str(m.max_position_embeddings))
    console().print(t)


@guarded
def gpus(fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"), catalog: Path | None = CatalogOpt) -> None:
    """List GPUs with their datasheet figures (dense TFLOPS)."""
    cat = load_catalog(catalog)
    if fmt == TableOrJson.json:
        emit_json([asdict(g) for g in cat.gpus.values()])
        return
    from rich.table import Table

    t = Table(title="GPUs (dense tensor throughput)")
    for c in ("gpu", "architecture", "memory GB", "bandwidth GB/s", "BF16 TFLOPS", "FP8 TFLOPS", "NVLink GB/s"):
        t.add_column(c)
    for g in cat.gpus.values():
        t.add_row(g.name, g.architecture, f"{g.memory_gib:g}", f"{g.memory_bandwidth_gbs:g}",
                  f"{g.bf16_dense_tflops or g.fp16_dense_tflops or '-'}", f"{g.fp8_dense_tflops or '-'}",
                  f"{g.nvlink_bandwidth_gbs or '-'}")
    console().print(t)


@guarded
def instances(fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
              region: str = typer.Option(DEFAULT_REGION, "--region"), catalog: Path | None = CatalogOpt) -> None:
    """List AWS GPU instance types with their on-demand price in a region."""
    cat = load_catalog(catalog)
    cat.check_region(region)
    rows = []
    for i in cat.instances.values():
        od = cat.price(i.instance_type, region, "on-demand")
        spot = cat.price(i.instance_type, region, "spot")
        rows.append({**asdict(i), "region": region, "offered": bool(cat.offered_azs(i.instance_type, region)),
                     "on_demand_usd_per_hour": od.usd_per_hour if od else None,
                     "spot_usd_per_hour": spot.usd_per_hour if spot else None})
    if fmt == TableOrJson.json:
        emit_json(rows)
        return
    from rich.table import Table

    t = Table(title=f"GPU instances in {region}")
    for c in ("instance", "gpu", "gpus", "GiB/gpu", "vCPU", "interconnect", "offered", "$/h on-demand", "$/h spot"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["instance_type"], r["gpu"], f"{r['gpu_count']:g}", f"{r['gpu_memory_gib_each']:g}",
                  str(r["vcpus"]), r["gpu_interconnect"], "yes" if r["offered"] else "no",
                  f"{r['on_demand_usd_per_hour']:.3f}" if r["on_demand_usd_per_hour"] else "not priced",
                  f"{r['spot_usd_per_hour']:.3f}" if r["spot_usd_per_hour"] else "-")
    console().print(t)
