"""Every AWS region plans offline from the bundled catalog (on-demand prices per region from the same
source as us-east-1), and a region without data says exactly that and how to refresh it."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.catalog.lookup import load_catalog
from sizing.catalog.paths import BUNDLED_DIR
from sizing.cli import app

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT.parent / "shared" / "reference" / "aws_gpu_on_demand_by_region.csv"
DEV = str(ROOT / "stacks" / "Pulumi.dev.yaml")


def _run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize("region", ["us-west-2", "eu-west-1"])
def test_dev_stack_plans_offline_in_other_regions_with_price_source_and_date(region: str) -> None:
    code, out, err = _run("plan", DEV, "--set", f"region={region}", "--format", "json",
                          "--catalog", str(BUNDLED_DIR))
    assert code == 0, err
    plan = json.loads(out)
    assert plan["region"] == region
    line = next(a for a in plan["assumptions"] if a.startswith("instance prices"))
    assert region in line and "2026-01-21" in line and "instances.vantage.sh" in line, line
    cat = load_catalog(BUNDLED_DIR)
    for pool in plan["pools"]:
        price = cat.price(pool["instance_type"], region, "on-demand")
        assert price is not None and pool["usd_per_instance_hour"] == pytest.approx(price.usd_per_hour)


@pytest.mark.skipif(not REF.exists(), reason="the reference material is not next to this checkout")
def test_bundled_prices_match_the_reference_row_for_row() -> None:
    cat = load_catalog(BUNDLED_DIR)
    with REF.open(newline="") as f:
        ref = [r for r in csv.DictReader(f) if r["instance_type"] in cat.instances]
    assert len(ref) > 600
    for r in ref:
        p = cat.price(r["instance_type"], r["region"], "on-demand")
        assert p is not None, (r["instance_type"], r["region"])
        assert p.usd_per_hour == pytest.approx(float(r["on_demand_usd_per_hour"])), (r["instance_type"], r["region"])
        assert p.as_of == r["as_of"]
    on_demand = [p for p in cat.prices.values() if p.purchase == "on-demand"]
    assert len(on_demand) == len(ref)


def test_region_without_prices_says_so_and_how_to_refresh(tmp_path: Path) -> None:
    with (BUNDLED_DIR / "prices.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    with (tmp_path / "prices.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(r for r in rows if r["region"] == "us-east-1")
    code, out, err = _run("plan", DEV, "--set", "region=eu-west-1", "--catalog", str(tmp_path))
    assert code == 3 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "no on-demand prices for eu-west-1" in lines[0]
    assert "llmcap catalog refresh --region eu-west-1" in lines[0]


def test_region_without_offerings_says_so_and_how_to_refresh() -> None:
    code, out, err = _run("plan", DEV, "--set", "region=us-gov-west-1", "--catalog", str(BUNDLED_DIR))
    assert code == 3 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "no AZ offerings for us-gov-west-1" in lines[0]
    assert "llmcap catalog refresh --region us-gov-west-1" in lines[0]


def test_unknown_region_is_still_bad_input() -> None:
    code, _, err = _run("plan", DEV, "--set", "region=us-westt-2", "--catalog", str(BUNDLED_DIR))
    assert code == 2 and "us-west-2" in err
