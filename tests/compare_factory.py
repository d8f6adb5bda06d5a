"""A feasible compare row (sizing.analysis.comparison.OptionSummary) with only what a verdict test varies."""

from __future__ import annotations

from sizing.analysis.comparison import OptionSummary


def option_row(label: str, usd_per_month: float, blast_radius: float, pools: list[str], model: str = "m",
               gpus: int = 8) -> OptionSummary:
    return OptionSummary(
        label=label, stack=label, strategy="auto", model=model, pools=pools, gpu="L4", instance_type="g6.12xlarge",
        precision="fp8", gpus=gpus, instances=gpus // 4, usd_per_hour=usd_per_month / 730,
        usd_per_month=usd_per_month, all_in_usd_per_month=usd_per_month, usd_per_million_output_tokens=1.0,
        usd_per_million_output_tokens_at_capacity=1.0, slo_figures=["TTFT p95 100 ms (90%)", "ITL p95 20 ms (20%)"],
        slo_headroom=0.2, blast_radius=blast_radius, survives_node_loss=True, cold_start_s=300.0, utilization=0.5,
        cheapest_api_usd_per_million_output_tokens=None, warnings=[])
