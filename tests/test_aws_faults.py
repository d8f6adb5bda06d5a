"""`llmcap catalog refresh` never replaces good data with nothing or with a half-written
generation (issue 18 items 1 and 2): each injected fault is one line and leaves the cache
byte-identical. Run with -s to see the table (also: python bench/aws_faults.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.adapters.aws import AwsClients
from tests.aws_faults import FAULTS, Outcome, ec2_client, make_baseline, pricing_client, run_fault, snapshot, table
from tests.aws_support import set_dummy_aws_env

OUTCOMES: list[Outcome] = []


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("faults")
    with pytest.MonkeyPatch.context() as mp:
        set_dummy_aws_env(mp, tmp, None)
        return make_baseline(tmp)


# The fast run keeps one fault of each kind (an empty EC2 answer, a denied call, an unreachable endpoint, a bad
# price, a full disk, Ctrl-C, a failed rename); scripts/check.sh and CI run all of them.
FAST_FAULTS = {"no GPU instance types (SCP / region not opted in)", "UnauthorizedOperation on spot history",
               "endpoint unreachable", 'PriceList "USD": "abc"', "disk full on the 2nd table",
               "interrupt (Ctrl-C) on the 3rd table", "rename of the generation fails"}


@pytest.mark.parametrize("fault", [f if f.name in FAST_FAULTS else pytest.param(f, marks=pytest.mark.slow)
                                   for f in FAULTS], ids=[f.name for f in FAULTS])
def test_fault_leaves_the_cache_byte_identical(baseline: Path, tmp_path: Path, fault: object) -> None:
    o = run_fault(fault, baseline, tmp_path / "work")  # type: ignore[arg-type]
    OUTCOMES.append(o)
    assert o.ok, o


def test_fault_table_printed() -> None:
    if OUTCOMES:
        print("\n" + table(OUTCOMES))
        assert all(o.ok for o in OUTCOMES)


def test_baseline_is_a_symlinked_generation_with_dated_spot_medians(baseline: Path) -> None:
    assert baseline.is_symlink() and baseline.resolve().name.startswith(".catalog.gen-")
    spot = (baseline / "spot_prices.csv").read_text().splitlines()
    assert spot[0].startswith("instance_type,region,availability_zone,usd_per_hour,price_changes,window_start")
    assert len(spot) > 1 and "time-weighted median" in spot[1]


def test_cli_refuses_an_empty_answer_in_one_line(baseline: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from sizing.cli import app

    work = tmp_path / "cli"
    shutil.copytree(baseline.parent, work, symlinks=True)
    before = snapshot(work)
    empty = {"after-call.ec2.DescribeInstanceTypes": lambda parsed, **_: parsed.__setitem__("InstanceTypes", [])}
    monkeypatch.setattr(AwsClients, "from_env", classmethod(
        lambda cls: AwsClients(injected={"ec2": ec2_client(empty), "pricing": pricing_client()})))
    r = CliRunner().invoke(app, ["catalog", "refresh", "--region", "us-east-1", "--out", str(work / "catalog")])
    assert r.exit_code == 2, r.output
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "refresh refused for us-east-1" in errors[0] and "--allow-shrink" in errors[0]
    assert snapshot(work) == before


def test_a_legacy_real_directory_cache_is_swapped_for_a_generation(baseline: Path, tmp_path: Path) -> None:
    import shutil

    from sizing.adapters.aws import aws_errors, refresh_catalog
    from sizing.catalog.lookup import Catalog

    legacy = tmp_path / "c" / "catalog"
    shutil.copytree(baseline.resolve(), legacy)  # a plain directory, as older llmcap versions wrote
    (legacy / "gpus.csv").write_text((Path(__file__).parents[1] / "sizing/data/gpus.csv").read_text())
    with aws_errors():
        refresh_catalog(["us-east-1"], legacy, AwsClients(injected={"ec2": ec2_client(),
                                                                    "pricing": pricing_client()}), Catalog())
    assert legacy.is_symlink() and (legacy / "gpus.csv").is_file()  # the user's own file carried over
    assert [p.name.endswith("-legacy") for p in legacy.parent.iterdir() if p.name.startswith(".catalog.gen-")] \
        .count(True) == 1


def test_a_directory_that_is_not_a_catalog_is_never_swapped_away(baseline: Path, tmp_path: Path) -> None:
    from sizing.adapters.aws import AwsDataError, aws_errors, refresh_catalog
    from sizing.catalog.lookup import Catalog

    home = tmp_path / "home"
    (home / "src").mkdir(parents=True)
    (home / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    with pytest.raises(AwsDataError, match="is not a catalog directory"), aws_errors():
        refresh_catalog(["us-east-1"], home, AwsClients(injected={"ec2": ec2_client(), "pricing": pricing_client()}),
                        Catalog())
    assert snapshot(tmp_path) == before
