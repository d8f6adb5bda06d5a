"""Money: $/hour, $/month (730 h), $ per 1M output tokens, the platform line, and the hosted-API
bill for the same traffic (prices from genai-prices, with the catalog's api_prices.csv for
providers genai-prices lacks).

Formulas: cost per 1M output tokens = $/hour ÷ (output tokens/s × 3,600) × 1,000,000.
An API's bill for the same traffic = input Mtok × ((1 − c) × input price + c × cache-read price) + output Mtok ×
output price, where c is the workload's prefix-reuse share when the API has a cache-read price (its prompt
cache bills a repeated prefix at that price), else 0: the same share the self-hosted plan is sized with.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sizing.catalog.records import ApiModel, ApiPrice
from sizing.plan import ApiComparison, CostLine

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog

HOURS_PER_MONTH = 730.0
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600.0


def usd_per_month(usd_per_hour: float) -> float:
    return usd_per_hour * HOURS_PER_MONTH


def usd_per_million_tokens(usd_per_hour: float, tokens_per_s: float) -> float:
    """$/hour ÷ (tokens/s × 3,600) × 1e6; infinite when there is no throughput."""
    if tokens_per_s <= 0:
        return math.inf
    return usd_per_hour / (tokens_per_s * 3600.0) * 1e6


__all__ = ["HOURS_PER_MONTH", "SECONDS_PER_MONTH", "ApiModel", "api_comparison", "api_prices_for",
           "comparable_api_model", "control_plane_log_gb_month", "control_plane_log_usd_per_gb", "cpu_price",
           "platform_lines", "usd_per_million_tokens", "usd_per_month"]


def comparable_api_model(catalog: Catalog, hf_id: str, params_active_b: float,
                         params_total_b: float) -> tuple[str, bool]:
    """The hosted-API model to compare with (api_models.csv): the same model when an API serves it, else
    the one nearest in active and total parameters (log distance). Returns (api model, exact?)."""
    models = catalog.api_models
    for m in models:
        if hf_id in m.exact_hf_ids:
            return m.api_model, True

    def dist(m: ApiModel) -> float:
        return abs(math.log(m.params_active_b / params_active_b)) + 0.5 * abs(
            math.log(m.params_total_b / params_total_b))

    return min(models, key=dist).api_model, False


def _genai_price(provider_id: str, model_ref: str) -> tuple[float, float, float | None] | None:
    """(input, output, cache read or None) USD per 1M tokens from genai-prices, or None when it lacks the
    model (its ModelPrice.cache_read_mtok: the price of input tokens read from the provider's prompt cache)."""
    try:
        from genai_prices import Usage, calc_price

        r = calc_price(Usage(input_tokens=1_000_000, output_tokens=1_000_000), model_ref=model_ref,
                       provider_id=provider_id)
        cached = getattr(r.model_price, "cache_read_mtok", None)
    except Exception:  # genai-prices raises LookupError/ValueError variants for unknown models
        return None
    return float(r.input_price), float(r.output_price), (None if cached is None else float(cached))


def api_prices_for(catalog: Catalog, api_model: str) -> list[ApiPrice]:
    """One price per provider for `api_model`: genai-prices where it has the model (its data is
    the reference), the catalog row otherwise (e.g. DeepInfra, which genai-prices lacks)."""
    out: list[ApiPrice] = []
    seen: set[str] = set()
    for p in catalog.api_prices:
        if p.model != api_model or p.provider in seen or "aggregator" in p.provider.lower():
            continue
        live = _genai_price(p.genai_prices_provider_id, p.provider_model_id) if p.genai_prices_provider_id else None
        if live:
            out.append(ApiPrice(p.model, p.provider, p.provider_model_id, live[0], live[1],
                                f"genai-prices ({p.provider_model_id})", p.as_of, p.genai_prices_provider_id,
                                live[2] if live[2] is not None else p.cache_read_usd_per_mtok))
        else:
            out.append(p)
        seen.add(p.provider)
    return out


def input_usd_per_mtok(input_price: float, cache_read_price: float | None, prefix_share: float) -> float:
    """The mean price of one input token, USD per 1M: the reused share at the cache-read price when the API
    has one, the rest (all of it without one) at the input price."""
    c = min(max(prefix_share, 0.0), 1.0) if cache_read_price is not None else 0.0
    return (1.0 - c) * input_price + c * (cache_read_price or 0.0)


def priced_row(row: ApiComparison, prefix_share: float, self_hosted_usd_per_month: float) -> ApiComparison:
    """`row` billed for its traffic with `prefix_share` of its input tokens reused (the cached share at the
    API's cache-read price; every figure of the row that depends on it)."""
    cached = row.usd_per_million_cached_input_tokens
    bill = (row.input_mtok_per_month * input_usd_per_mtok(row.usd_per_million_input_tokens, cached, prefix_share)
            + row.output_mtok_per_month * row.usd_per_million_output_tokens)
    per_out_token_blended = bill / (row.output_mtok_per_month * 1e6) if row.output_mtok_per_month > 0 else 0.0
    return row.model_copy(update={
        "usd_per_month_same_traffic": round(bill, 2),
        "ratio_to_self_hosted": round(bill / self_hosted_usd_per_month, 4) if self_hosted_usd_per_month else 0.0,
        "break_even_output_tokens_per_month": (self_hosted_usd_per_month / per_out_token_blended
                                               if per_out_token_blended > 0 else None),
        "prefix_share": round(max(prefix_share, 0.0), 4),
        "cached_input_share": round(min(max(prefix_share, 0.0), 1.0), 4) if cached is not None else 0.0})


def api_comparison(catalog: Catalog, hf_id: str, params_active_b: float, params_total_b: float,
                   input_tokens_per_s: float, output_tokens_per_s: float,
                   self_hosted_usd_per_month: float,
                   prefix_share: float = 0.0) -> tuple[list[ApiComparison], str | None]:
    """Hosted-API monthly bills for the same traffic, cheapest first, and a note when the model
    compared is only the nearest comparable one. `prefix_share`: the share of input tokens that repeat a
    cached prefix (the self-hosted plan's own share), billed at each API's cache-read price where it has one."""
    api_model, exact = comparable_api_model(catalog, hf_id, params_active_b, params_total_b)
    in_mtok = input_tokens_per_s * SECONDS_PER_MONTH / 1e6
    out_mtok = output_tokens_per_s * SECONDS_PER_MONTH / 1e6
    rows = []
    for p in api_prices_for(catalog, api_model):
        rows.append(priced_row(ApiComparison(
            provider=p.provider, model=p.provider_model_id or api_model, exact_model=exact,
            usd_per_million_input_tokens=p.input_usd_per_mtok, usd_per_million_output_tokens=p.output_usd_per_mtok,
            usd_per_million_cached_input_tokens=p.cache_read_usd_per_mtok,
            usd_per_month_same_traffic=0.0, ratio_to_self_hosted=0.0, break_even_output_tokens_per_month=None,
            source=f"{p.source}; {p.as_of}", input_mtok_per_month=in_mtok, output_mtok_per_month=out_mtok),
            prefix_share, self_hosted_usd_per_month))
    rows.sort(key=lambda r: r.usd_per_month_same_traffic)
    note = None if exact else (f"no hosted API serves {hf_id}; compared with the nearest comparable model "
                               f"{api_model}")
    return rows, note


# platform_prices.csv items of CloudWatch Logs (standard class) that price the EKS control-plane logs
CLOUDWATCH_INGESTION = "CloudWatch Logs ingestion (standard class)"
CLOUDWATCH_STORAGE = "CloudWatch Logs storage"


def control_plane_log_gb_month(catalog: Catalog, nodes: int) -> float:
    """EKS control-plane log volume (audit + authenticator), GB/month: an estimate (platform.csv rows)."""
    return catalog.number("control_plane_log_gb_base") + catalog.number("control_plane_log_gb_per_node") * nodes


def control_plane_log_usd_per_gb(catalog: Catalog, region: str) -> float | None:
    """USD for one GB of control-plane logs in `region`: ingestion plus its steady-state storage under the
    retention (CloudWatch Logs standard class, platform_prices.csv rows); None where either is not priced."""
    ingest = catalog.platform_price(CLOUDWATCH_INGESTION, region)
    storage = catalog.platform_price(CLOUDWATCH_STORAGE, region)
    if ingest is None or storage is None:
        return None
    months_kept = catalog.number("control_plane_log_retention_days") / 30.4
    return ingest.usd + storage.usd * months_kept


def cpu_price(catalog: Catalog, instance_type: str, region: str) -> float | None:
    """On-demand USD per hour of a CPU instance type in `region` (cpu_instance_prices.csv), else None."""
    c = catalog.cpu_instances.get((instance_type, region, "on-demand"))
    return c.usd_per_hour if c is not None else None


def platform_lines(catalog: Catalog, region: str, weights_gib: float, root_volume_gib_total: float,
                   system_instance_type: str, system_nodes: int, nat_gateways: int,
                   nodes_total: int = 0) -> list[CostLine]:
    """The platform under the GPUs: EKS control plane and its CloudWatch logs, system nodes, NAT gateways,
    weight storage and node root volumes (GPU and system, GiB). `nodes_total`: GPU + system nodes, for the
    log estimate. A line without a price in the catalog shows as not priced."""
    def unit(item: str) -> float | None:
        p = catalog.platform_price(item, region)
        return p.usd if p is not None else None

    def line(name: str, qty: float, unit_name: str, price: float | None, factor: float, src: str) -> CostLine:
        return CostLine(name=name, quantity=qty, unit=unit_name,
                        usd_per_month=None if price is None else round(price * qty * factor, 2), source=src)

    cpu = cpu_price(catalog, system_instance_type, region)
    return [
        line("EKS control plane", 1, "cluster", unit("EKS control plane (standard support)"), HOURS_PER_MONTH,
             "platform_prices.csv"),
        line(f"EKS control-plane logs (CloudWatch, {int(catalog.number('control_plane_log_retention_days'))}-day "
             "retention, estimated volume)", round(control_plane_log_gb_month(catalog, nodes_total), 1), "GB",
             control_plane_log_usd_per_gb(catalog, region), 1.0, "platform_prices.csv"),
        line(f"System nodes (on-demand, {system_instance_type})", system_nodes, "instances", cpu, HOURS_PER_MONTH,
             "cpu_instance_prices.csv"),
        line("NAT gateways", nat_gateways, "gateways", unit("NAT gateway hourly"), HOURS_PER_MONTH,
             "platform_prices.csv"),
        line("Public IPv4 addresses (NAT gateways)", nat_gateways, "addresses", unit("Public IPv4 address"),
             HOURS_PER_MONTH, "platform_prices.csv"),
        line("Weights storage (S3 Standard)", round(weights_gib * 2**30 / 1e9, 1), "GB",
             unit("S3 Standard storage, first 50 TB/month"), 1.0, "platform_prices.csv"),
        line("Node root volumes (EBS gp3)", round(root_volume_gib_total * 2**30 / 1e9, 1), "GB",
             unit("EBS gp3 storage"), 1.0, "platform_prices.csv"),
    ]
