"""Cold start that is true: every term from a data row, a new node takes minutes (not the weights read
alone), and compare and plan report the same figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from sizing.analysis.compare import cold_start_s
from sizing.catalog.platform import number
from sizing.perf.cold_start import cold_start
from sizing.perf.memory import GIB
from sizing.planning.planner import plan_for

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dev_pool():  # type: ignore[no-untyped-def]
    return plan_for(ROOT / "stacks" / "Pulumi.dev.yaml").pools[0]


def test_terms_come_from_the_data_and_add_up(dev_pool) -> None:  # type: ignore[no-untyped-def]
    cs = cold_start(dev_pool, "nvme")
    names = [t.name for t in cs.terms]
    assert names == ["node boot", "image pull", "S3 sync", "weights load", "engine start"]
    by = {t.name: t.seconds for t in cs.terms}
    assert by["node boot"] == number("node_boot_s") and by["engine start"] == number("engine_init_s")
    assert by["image pull"] == pytest.approx(number("vllm_image_gib") * GIB / 1e9 / number("image_pull_gbs"))
    gb = dev_pool.model_cache_gib_per_node * GIB / 1e9
    assert by["S3 sync"] == pytest.approx(gb / number("weights_load_gbs_s3"))
    assert by["weights load"] == pytest.approx(gb / number("weights_load_gbs_nvme"))
    assert cs.total_s == pytest.approx(sum(by.values()))
    assert cs.pod_on_warm_node_s == pytest.approx(by["S3 sync"] + by["weights load"] + by["engine start"])


def test_stream_mode_reads_s3_once_and_infra_mode_names_are_accepted(dev_pool) -> None:  # type: ignore[no-untyped-def]
    a, b = cold_start(dev_pool, "stream"), cold_start(dev_pool, "s3-stream")
    assert a == b and [t.name for t in a.terms] == ["node boot", "image pull", "weights stream", "engine start"]
    with pytest.raises(ValueError):
        cold_start(dev_pool, "floppy")


def test_a_new_node_takes_minutes_and_every_report_says_the_same(dev_pool) -> None:  # type: ignore[no-untyped-def]
    plan = plan_for(ROOT / "stacks" / "Pulumi.dev.yaml")
    total = cold_start(dev_pool).total_s
    assert total > 5 * 60 > 10 * dev_pool.per_replica.weights_load_s
    assert plan.pools[0].per_replica.cold_start_s == pytest.approx(total, abs=0.1)
    assert cold_start_s(plan) == pytest.approx(total, abs=0.1)


def test_big_model_cold_start_grows_with_its_weights() -> None:
    small = plan_for(ROOT / "stacks" / "Pulumi.dev.yaml").pools[0]
    big = plan_for(ROOT / "stacks" / "Pulumi.llama405b.yaml").pools[0]
    assert cold_start(big).total_s > cold_start(small).total_s + 300
