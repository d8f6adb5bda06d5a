"""`llmcap models`, `llmcap gpus`, `llmcap instances`: catalog listings."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import typer

from sizing.catalog.lookup import load_catalog
from sizing.cli.common import TableOrJson, console, emit_json, guarded
from sizing.stack import DEFAULT_REGION

CatalogOpt = typer.Option(None, "--catalog", help="catalog directory (default: bundled, or the user cache)")


def _print(title: str, headers: list[str], cells: list[list[str]]) -> None:
    """The table when the console is wide enough, else key: value per row (sizing.report.format.fitted_table)."""
    from sizing.report.format import fitted_table

    c = console()
    c.print(fitted_table(title, headers, cells, c.width))


@guarded
def models(fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"), catalog: Path | None = CatalogOpt) -> None:
    """List the model architectures in the catalog."""
    cat = load_catalog(catalog)
    rows = list(cat.models.values())
    if fmt == TableOrJson.json:
        emit_json([asdict(m) for m in rows])
        return
    cells = [[m.hf_id, m.short_name, f"{m.params_total_b:g}" + (f" ({m.params_active_b:g})" if m.is_moe else ""),
              str(m.num_layers), str(m.num_kv_heads), m.attention_kind, str(m.max_position_embeddings)] for m in rows]
    _print("Models", ["hf_id", "short name", "params B (active)", "layers", "kv heads", "attention", "max ctx"],
           cells)


@guarded
def gpus(fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"), catalog: Path | None = CatalogOpt) -> None:
    """List GPUs with their datasheet figures (dense TFLOPS)."""
    cat = load_catalog(catalog)
    if fmt == TableOrJson.json:
        emit_json([asdict(g) for g in cat.gpus.values()])
        return
    cells = [[g.name, g.architecture, f"{g.memory_gib:g}", f"{g.memory_bandwidth_gbs:g}",
              f"{g.bf16_dense_tflops or g.fp16_dense_tflops or '-'}", f"{g.fp8_dense_tflops or '-'}",
              f"{g.nvlink_bandwidth_gbs or '-'}"] for g in cat.gpus.values()]
    _print("GPUs (dense tensor throughput)", ["gpu", "architecture", "memory GB", "bandwidth GB/s", "BF16 TFLOPS",
                                              "FP8 TFLOPS", "NVLink GB/s"], cells)


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
    cells = [[r["instance_type"], r["gpu"], f"{r['gpu_count']:g}", f"{r['gpu_memory_gib_each']:g}",
              str(r["vcpus"]), r["gpu_interconnect"], "yes" if r["offered"] else "no",
              f"{r['on_demand_usd_per_hour']:.3f}" if r["on_demand_usd_per_hour"] else "not priced",
              f"{r['spot_usd_per_hour']:.3f}" if r["spot_usd_per_hour"] else "-"] for r in rows]
    _print(f"GPU instances in {region}", ["instance", "gpu", "gpus", "GiB/gpu", "vCPU", "interconnect", "offered",
                                          "$/h on-demand", "$/h spot"], cells)
