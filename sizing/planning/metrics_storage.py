"""The Prometheus volume: its size from the retention, the scrape interval and the series the cluster
exports (Prometheus's capacity formula, prometheus.io/docs/prometheus/latest/storage:
`needed_disk_space = retention_time_seconds * ingested_samples_per_second * bytes_per_sample`), divided by
the share of the volume the retention may fill (the rest is for compactions), at least a minimum. Every
figure is a row of sizing/data/platform.csv with its source. Units: GiB (2^30 bytes), seconds. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.catalog.platform import number

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.plan import Plan

GIB = 2**30


@dataclass(frozen=True)
class PrometheusVolume:
    series: int  # active series, at the pools' and system nodes' max
    blocks_gib: float  # the formula's disk space for the retention
    volume_gib: int  # the PersistentVolume's size (whole GiB)
    retention_size_gib: int  # Prometheus's retentionSize: the share of the volume the blocks may fill


def prometheus_volume(plan: Plan, system_nodes_max: int, retention_s: float, scrape_interval_s: float,
                      catalog: Catalog | None = None) -> PrometheusVolume:
    """The volume for `plan`'s cluster at its largest (every pool at instances_max, the system node group at
    `system_nodes_max`), keeping `retention_s` of samples scraped every `scrape_interval_s`."""
    nodes = sum(p.instances_max for p in plan.pools) + system_nodes_max
    series = int(number("prometheus_series_base", catalog) + number("prometheus_series_per_node", catalog) * nodes)
    blocks = retention_s * series / scrape_interval_s * number("prometheus_bytes_per_sample", catalog) / GIB
    fraction = number("prometheus_retention_size_fraction", catalog)
    volume = max(math.ceil(blocks / fraction), math.ceil(number("prometheus_volume_min_gib", catalog)))
    return PrometheusVolume(series=series, blocks_gib=blocks, volume_gib=volume,
                            retention_size_gib=math.floor(volume * fraction))
