"""One reader for data files (issue 15 step 3): every table in sizing/data goes through the Catalog, so
a `--catalog DIR` copy of any file changes the plan; each file is checked against sizing/data/schema.yaml
on load, and a bad row is one line naming the file, the row and the column (exit 2)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sizing.catalog.lookup import load_catalog
from sizing.catalog.paths import BUNDLED_DIR
from sizing.errors import EXIT_BAD_INPUT, LlmcapError
from sizing.planning.planner import plan_for
from tests.diff_support import cli_app

ROOT = Path(__file__).parents[1]
DEV = ROOT / "stacks" / "Pulumi.dev.yaml"


def _edit(tmp: Path, name: str, key_col: str, key: str, col: str, value: str) -> Path:
    """A copy of bundled `name` in `tmp` with `col` of the row whose `key_col` is `key` set to `value`."""
    with (BUNDLED_DIR / name).open(newline="", encoding="utf-8") as f:
        rd = csv.DictReader(f)
        fields, rows = list(rd.fieldnames or []), list(rd)
    hit = [r for r in rows if r[key_col] == key]
    assert hit, f"{name} has no row {key_col}={key}"
    for r in hit:
        r[col] = value
    with (tmp / name).open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return tmp


def _line(plan: object, prefix: str) -> float:
    (ln,) = [c for c in plan.cost_lines if c.name.startswith(prefix)]  # type: ignore[attr-defined]
    assert ln.usd_per_month is not None
    return float(ln.usd_per_month)


BASE = plan_for(DEV)


def test_cpu_instance_prices_override_changes_system_node_cost(tmp_path: Path) -> None:
    sys_type = BASE.platform.system_nodes.instance_type
    _edit(tmp_path, "cpu_instance_prices.csv", "instance_type", sys_type, "usd_per_hour", "1.5")
    p = plan_for(DEV, catalog=tmp_path)
    n = p.platform.system_nodes.desired
    assert _line(p, "System nodes") == pytest.approx(1.5 * n * 730, abs=0.01)
    assert _line(p, "System nodes") != _line(BASE, "System nodes")
    assert "cpu_instance_prices.csv" in load_catalog(tmp_path).overridden


def test_system_pods_override_changes_system_node_count(tmp_path: Path) -> None:
    _edit(tmp_path, "system_pods.csv", "component", "router", "cpu_m", "3500")
    p = plan_for(DEV, catalog=tmp_path)
    assert p.platform.system_nodes.desired > BASE.platform.system_nodes.desired
    assert p.platform.system_nodes.cpu_m_requested >= BASE.platform.system_nodes.cpu_m_requested + 2 * 2500


def test_node_allocatable_override_changes_pod_requests(tmp_path: Path) -> None:
    _edit(tmp_path, "node_allocatable.csv", "item", "vm_memory_overhead_fraction", "value", "0.25")
    p = plan_for(DEV, catalog=tmp_path)
    assert p.pools[0].memory_mib_per_replica < BASE.pools[0].memory_mib_per_replica


def test_node_daemonsets_override_changes_pod_requests(tmp_path: Path) -> None:
    _edit(tmp_path, "node_daemonsets.csv", "daemonset", "aws-node", "cpu_millicores", "1500")
    p = plan_for(DEV, catalog=tmp_path)
    assert p.pools[0].cpu_millicores_per_replica < BASE.pools[0].cpu_millicores_per_replica


def test_platform_override_changes_system_node_floor(tmp_path: Path) -> None:
    _edit(tmp_path, "platform.csv", "item", "system_node_count", "value", "5")
    p = plan_for(DEV, catalog=tmp_path)
    assert p.platform.system_nodes.desired == 5
    assert _line(p, "System nodes") == pytest.approx(_line(BASE, "System nodes") / 2 * 5, abs=0.05)


def test_interconnects_override_reaches_the_step_model(tmp_path: Path) -> None:
    from sizing.perf.step import link_bandwidth_gbs

    cat = load_catalog()
    gpu = cat.gpu("L4")
    _edit(tmp_path, "interconnects.csv", "gpu", "L4", "pcie_bandwidth_gbs_per_direction", "7.5")
    assert link_bandwidth_gbs(load_catalog(tmp_path), gpu, "pcie") == 7.5
    assert link_bandwidth_gbs(cat, gpu, "pcie") != 7.5


def test_small_tables_are_catalog_tables(tmp_path: Path) -> None:
    """quota_families, aws_gpu_names and api_models are read through the catalog too."""
    from sizing.cost.money import comparable_api_model

    cat = load_catalog()
    assert any(q.family_prefix == "g" for q in cat.quota_families)
    assert {g.gpu for g in cat.aws_gpu_names} >= {"H100-SXM"}
    _edit(tmp_path, "api_models.csv", "api_model", "Llama-3.1-8B-Instruct", "exact_hf_ids", "org/x")
    assert comparable_api_model(load_catalog(tmp_path), "org/x", 8, 8) == ("Llama-3.1-8B-Instruct", True)
    assert comparable_api_model(cat, "org/x", 8, 8)[1] is False


# ---------------------------------------------------------------- schema checks


def schema() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((BUNDLED_DIR / "schema.yaml").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_schema_covers_every_data_file() -> None:
    files = {p.name for p in BUNDLED_DIR.glob("*.csv")}
    assert set(schema()["tables"]) == files
    assert set(schema()["json_files"]) == {p.name for p in BUNDLED_DIR.glob("*.json")}
    for name, t in schema()["tables"].items():
        assert isinstance(t["version"], int) and t["reason"].strip(), name
        with (BUNDLED_DIR / name).open(newline="", encoding="utf-8") as f:
            header = next(csv.reader(f))
        assert set(t["columns"]) <= set(header), name


def test_every_bundled_table_loads_clean() -> None:
    from sizing.catalog.lookup import Catalog

    cat = Catalog()
    for name in schema()["tables"]:
        cat.rows(name)  # raises CatalogDataError on any bad row


def test_refresh_writers_write_the_required_columns() -> None:
    from sizing.adapters import aws

    for name, fields in (("instances.csv", aws.INSTANCE_FIELDS), ("prices.csv", aws.PRICE_FIELDS),
                         ("offerings.csv", aws.OFFERING_FIELDS)):
        assert set(schema()["tables"][name]["columns"]) <= set(fields), name


def _copy(tmp: Path, name: str) -> Path:
    shutil.copy(BUNDLED_DIR / name, tmp / name)
    return tmp / name


def test_non_number_names_file_row_and_column(tmp_path: Path) -> None:
    _edit(tmp_path, "cpu_instance_prices.csv", "instance_type", "m6i.xlarge", "usd_per_hour", "cheap")
    with pytest.raises(LlmcapError) as e:
        load_catalog(tmp_path).cpu_instances  # noqa: B018
    msg = str(e.value)
    assert e.value.exit_code == EXIT_BAD_INPUT and "\n" not in msg
    assert "cpu_instance_prices.csv" in msg and "row 2" in msg and "usd_per_hour" in msg and "'cheap'" in msg


def test_missing_column_names_file_and_column(tmp_path: Path) -> None:
    p = _copy(tmp_path, "system_pods.csv")
    lines = p.read_text(encoding="utf-8").splitlines()
    lines[0] = lines[0].replace("memory_mib", "mem")
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LlmcapError) as e:
        load_catalog(tmp_path).system_pods  # noqa: B018
    assert "system_pods.csv" in str(e.value) and "memory_mib" in str(e.value) and "\n" not in str(e.value)


def test_short_row_and_newer_schema_version(tmp_path: Path) -> None:
    p = _copy(tmp_path, "node_daemonsets.csv")
    text = p.read_text(encoding="utf-8")
    line = len(text.splitlines()) + 1  # the appended row's line; rows count from 1 after the header
    p.write_text(text + "broken,kube-system,yes\n", encoding="utf-8")
    with pytest.raises(LlmcapError, match=rf"node_daemonsets\.csv row {line - 1} \(line {line}\): no value for "
                                          r"cpu_millicores"):
        load_catalog(tmp_path).node_daemonsets  # noqa: B018
    d2 = tmp_path / "v"
    d2.mkdir()
    q = _copy(d2, "platform.csv")
    rows = q.read_text(encoding="utf-8").splitlines()
    q.write_text("\n".join([rows[0] + ",schema_version"] + [r + ",99" for r in rows[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(LlmcapError, match=r"platform\.csv row 1 \(line 2\): schema_version 99"):
        load_catalog(d2).platform  # noqa: B018


@pytest.mark.parametrize("name,key_col,key,col,value", [
    ("cpu_instance_prices.csv", "instance_type", "m6i.xlarge", "vcpus", "four"),
    ("node_allocatable.csv", "item", "eviction_hard_memory_mib", "value", "lots"),
    ("prices.csv", "instance_type", "g6e.xlarge", "usd_per_hour", "n/a"),
    ("checkpoints.csv", "hf_id", "meta-llama/Meta-Llama-3-8B-Instruct", "safetensors_bytes", "16 GB"),
])
def test_plan_with_a_broken_file_is_one_error_line(tmp_path: Path, name: str, key_col: str, key: str,
                                                   col: str, value: str) -> None:
    _edit(tmp_path, name, key_col, key, col, value)
    r = CliRunner().invoke(cli_app(), ["plan", str(DEV), "--catalog", str(tmp_path)])
    assert r.exit_code == 2, r.output
    out = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(out) == 1 and out[0].startswith("error:"), r.output
    assert name in out[0] and col in out[0] and f"'{value}'" in out[0], out[0]
    assert "Traceback" not in r.output


def test_platform_override_reaches_cold_start(tmp_path: Path) -> None:
    _edit(tmp_path, "platform.csv", "item", "node_boot_s", "value", "900")
    p = plan_for(DEV, catalog=tmp_path)
    assert p.pools[0].per_replica.cold_start_s == pytest.approx(BASE.pools[0].per_replica.cold_start_s + 750, abs=0.2)


def test_saved_plan_records_an_overridden_table(tmp_path: Path) -> None:
    from sizing.planning.saved_plan import make_saved_plan
    from sizing.stack import load_stack

    _edit(tmp_path, "system_pods.csv", "component", "router", "cpu_m", "1500")
    cat = load_catalog(tmp_path)
    saved = make_saved_plan(DEV, load_stack(DEV), plan_for(DEV, catalog=tmp_path), cat)
    files = {f.name: f.source for f in saved.generation.catalog}
    assert files["system_pods.csv"] == str(tmp_path.resolve() / "system_pods.csv")
    assert files["gpus.csv"] == "bundled" and "node_daemonsets.csv" not in files
    bundled = make_saved_plan(DEV, load_stack(DEV), BASE, load_catalog())
    assert "system_pods.csv" not in {f.name for f in bundled.generation.catalog}


def test_calibration_json_is_checked(tmp_path: Path) -> None:
    from sizing.catalog.calibration import load_calibration

    assert load_calibration().values  # the bundled file has every key the schema names
    bad = tmp_path / "perf_calibration.json"
    bad.write_text('{"parameters": {}, ', encoding="utf-8")
    with pytest.raises(LlmcapError, match=r"perf_calibration\.json: not a JSON file") as e:
        load_calibration(str(bad))
    assert "\n" not in str(e.value)
    bad.write_text('{"parameters": {}}', encoding="utf-8")
    with pytest.raises(LlmcapError, match=r"no key goodput_range, fitted_on"):
        load_calibration(str(bad))


def test_calibration_override_changes_the_plan(tmp_path: Path) -> None:
    """`--catalog DIR` with its own perf_calibration.json is the model the plan uses (it was read from
    sizing/data only, whatever the catalog), and the saved plan records which fit it used."""
    import json

    from sizing.planning.saved_plan import make_saved_plan
    from sizing.stack import load_stack

    doc = json.loads((BUNDLED_DIR / "perf_calibration.json").read_text(encoding="utf-8"))
    doc["parameters"]["request_overhead_ms"]["value"] = 400.0  # a slow front end: TTFT grows by 400 ms
    (tmp_path / "perf_calibration.json").write_text(json.dumps(doc), encoding="utf-8")
    cat = load_catalog(tmp_path)
    assert cat.calibration.v("request_overhead_ms") == 400.0
    assert load_catalog().calibration.v("request_overhead_ms") != 400.0
    p = plan_for(DEV, catalog=tmp_path)
    assert p.pools[0].per_replica.ttft_ms > BASE.pools[0].per_replica.ttft_ms + 300
    saved = make_saved_plan(DEV, load_stack(DEV), p, cat)
    assert saved.generation.calibration.source == str((tmp_path / "perf_calibration.json").resolve())
    assert make_saved_plan(DEV, load_stack(DEV), BASE, load_catalog()).generation.calibration.source == "bundled"
