"""The calibration rows the project fits and tests on live in the repository (bench/calibration,
issue 31 item 1): a clone alone reproduces the fit, the accuracy table and every test. The copy
still equals the shared folder beside a checkout where that folder exists; nothing else reads it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from bench.calib_rows import CALIB_DIR, DEFAULT_CSVS

ROOT = Path(__file__).resolve().parents[1]
# ../shared beside a checkout; a worktree under wt/ of that checkout's parent sees it two levels up
SHARED = next((d for d in (ROOT.parent / "shared" / "calibration", ROOT.parent.parent / "shared" / "calibration")
               if d.is_dir()), ROOT.parent / "shared" / "calibration")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_calibration_rows_are_in_the_repository() -> None:
    assert CALIB_DIR.resolve().is_relative_to(ROOT.resolve())
    for csv_path in DEFAULT_CSVS:
        assert csv_path.is_file(), f"{csv_path} missing: the fit and the accuracy table need it"
    have = _files(CALIB_DIR)
    for name in ("README.md", "VENDORED.md", "perf_points.csv", "perf_points_2026.csv",
                 "perf_points_2026_ext.csv", "configs/SOURCES.md", "configs/GLM-4.5-Air/config.json",
                 "configs/GLM-4.6/config.json"):
        assert name in have, f"bench/calibration/{name} missing"
    git = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "bench/calibration"], cwd=ROOT,
                         capture_output=True, text=True)
    if git.returncode == 0:  # in a git checkout (a copied tree has no .git): git would clone the folder
        assert "bench/calibration/perf_points_2026_ext.csv" in git.stdout.split(), "bench/calibration is ignored by git"


@pytest.mark.skipif(not SHARED.is_dir(), reason="no ../shared/calibration beside this checkout (a plain clone)")
def test_the_copy_matches_the_shared_calibration_folder() -> None:
    shared, have = _files(SHARED), _files(CALIB_DIR)
    have.pop("VENDORED.md")
    assert sorted(have) == sorted(shared), "bench/calibration lists other files than ../shared/calibration: re-copy"
    stale = [name for name in shared if have[name] != shared[name]]
    assert not stale, f"bench/calibration differs from ../shared/calibration in {stale}: re-copy the folder"


def test_no_code_or_test_reads_the_shared_calibration_folder() -> None:
    """Product, bench scripts and tests name only the in-repo copy of the calibration rows (this file
    alone names the shared folder, to compare against it)."""
    pattern = re.compile(r"shared[\"'/ ]*/[\"' ]*calibration|shared\"\s*/\s*\"calibration")
    offenders = []
    for folder in ("sizing", "infra", "bench", "tests", "scripts", "docs", "stacks"):
        for path in sorted((ROOT / folder).rglob("*")):
            if not path.is_file() or path.suffix not in {".py", ".sh", ".json", ".yaml", ".csv", ".toml", ".md"}:
                continue
            if path == Path(__file__).resolve() or "calibration" in path.relative_to(ROOT).parts[:2]:
                continue
            if pattern.search(path.read_text(encoding="utf-8", errors="replace")):
                offenders.append(path.relative_to(ROOT).as_posix())
    assert not offenders, f"these read ../shared (copy what they need into the repo): {offenders}"


def test_every_module_the_bench_scripts_import_is_declared() -> None:
    """`pip install -e ".[dev]"` installs what bench/*.py imports (scipy for the fit, once undeclared)."""
    from tests.test_extras import PYPROJECT, _dist_of, _name, _third_party_imports

    declared = {_name(r) for reqs in PYPROJECT["optional-dependencies"].values() for r in reqs}
    declared |= {_name(r) for r in PYPROJECT["dependencies"]}
    # a module not installed here (vllm, torch: the vllm-check extra, outside dev) is declared when an extra
    # names the distribution of its own name
    missing = {m: sorted(_dist_of(m)) for m in _third_party_imports(ROOT / "bench") - {"bench", "tests"}
               if not (_dist_of(m) or {m}) & declared}
    assert not missing, f"bench/ imports modules no extra of pyproject.toml declares: {missing}"


def test_every_source_has_a_publisher_group_with_a_reason() -> None:
    """bench/accuracy.py leaves one publisher/harness group out at a time (issue 31 item 2): every source
    prefix of the three files has its group, and the lab's pages share one."""
    import csv

    from bench.accuracy import GROUPS_FILE, source_groups

    with open(GROUPS_FILE, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert all(r["reason"].strip() for r in rows)
    groups = source_groups()
    sources = set()
    for path in DEFAULT_CSVS:
        with open(path, newline="", encoding="utf-8") as f:
            sources |= {r["id"].split("-")[0] for r in csv.DictReader(f)}
    assert sources <= set(groups), f"sources without a group: {sorted(sources - set(groups))}"
    assert {groups[s] for s in sources if s.startswith("gps")} | {groups["gpustackq"]} == {"gpustack"}
    assert groups["trt013"] == groups["nim"] and groups["dsr1h200"] == groups["dsh100"]


def test_the_three_files_load_and_unmodelled_rows_are_counted() -> None:
    from bench.accuracy import regimes
    from bench.calib_rows import load_rows
    from sizing.catalog.lookup import load_catalog

    skipped: dict[str, int] = {}
    rows = load_rows(load_catalog(), None, skipped)
    assert {r.source for r in rows} >= {"trt013", "gpsoss20h", "gpsglmaira", "gpsdsv32", "dsr1h200", "dsh100"}
    # every model is read, the Qwen3.5 and Nemotron hybrids too (819 rows); only two rows measuring 0 and the 96
    # rows gpsglmairh reprints from gpsglmaira (BENCHMARK_ASSUMPTIONS["reprinted_blocks"]) are left out
    assert skipped == {"a measured value of 0 (guidellm's anomalous medians: nothing to compare)": 2,
                       "reprinted from another page (gpsglmaira's Other Benchmark Cases tables: not this page's "
                       "run)": 96}
    hybrid = [r for r in rows if r.source in ("gpsq359b", "gpsq359bl", "gpsq35moe", "gpsq35moel", "vultrb200")]
    assert len(hybrid) == 819 - 2 and all(r.cfg.model.is_hybrid for r in hybrid)
    glm = next(r for r in rows if r.source == "gpsglmaira")
    assert glm.cfg.model.is_moe and glm.cfg.model.moe_num_experts == 128  # from bench/calibration/configs
    seen = {reg for r in rows for reg in regimes(r)}
    assert seen == {"low load", "near capacity", "burst", "long prompts", "MoE multi-GPU"}
