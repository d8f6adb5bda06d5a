"""`llmcap report STACK --out DIR`: the capacity design document. Every section is there; the capacity
table covers at least five GPU types × three user levels; every number of it (and of the summary) is what
`llmcap plan --format json` gives for the same inputs; the HTML loads nothing from the network; the
Markdown holds the same sections; bad input is one line and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.cli import app
from sizing.humanize import usd
from sizing.perf.overlay import ENV_VAR
from sizing.plan import Plan
from sizing.planning.planner import plan_for
from sizing.report.format import money
from tests.golden_files import GOLDEN_DIR, check_golden
from tests.html_checks import external_loads, parse

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "stacks" / "Pulumi.dev.yaml"
SECTIONS = ["summary", "requirements", "capacity", "scale", "arithmetic", "cost", "operations", "rollout",
            "assumptions", "model-error"]


def cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import sizing.catalog.lookup

    mp = pytest.MonkeyPatch()
    d = tmp_path_factory.mktemp("report")
    # hermetic, as the golden outputs: the bundled catalog, no calibration overlay, a relative stack path
    mp.setenv(ENV_VAR, str(d / "no-overlay.json"))
    mp.delenv("LLMCAP_CATALOG_DIR", raising=False)
    mp.setattr(sizing.catalog.lookup, "USER_CACHE_DIR", d / "no-catalog")
    mp.chdir(ROOT)
    try:
        code, stdout, err = cli("report", "stacks/Pulumi.dev.yaml", "--out", str(d / "doc"), "--no-pdf")
    finally:
        mp.undo()
    assert code == 0, stdout + err
    return d / "doc"


@pytest.fixture(scope="module")
def design(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / "design.json").read_text())  # type: ignore[no-any-return]


def test_writes_html_markdown_figures_and_inputs(out: Path) -> None:
    names = {p.name for p in out.iterdir()}
    assert {"design.html", "design.md", "design.json", "users.svg", "itl.svg"} <= names
    assert not [n for n in names if n.startswith(".")]  # no staging folder left behind


def test_every_section_in_reading_order(out: Path) -> None:
    html = (out / "design.html").read_text()
    assert parse(html).section_ids == SECTIONS
    md = (out / "design.md").read_text()
    heads = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert len(heads) == len(SECTIONS) and heads[0] == "Summary" and heads[2] == "Capacity by hardware"


def test_design_markdown_golden(out: Path, update_golden: bool) -> None:
    """What a reviewer reads, byte for byte (bash scripts/update_goldens.sh rewrites it)."""
    check_golden(GOLDEN_DIR / "report" / "dev" / "design.md", (out / "design.md").read_text(), update_golden)


def test_capacity_table_covers_five_gpus_and_three_user_levels(design: dict) -> None:  # type: ignore[type-arg]
    cap = design["capacity"]
    feasible_gpus = {c["gpu"] for c in cap["cells"] if c["feasible"]}
    assert len(cap["gpus"]) >= 5 and len(feasible_gpus) >= 5
    assert len(cap["user_levels"]) >= 3 and {100, 1000} <= set(cap["user_levels"])
    assert len(cap["cells"]) == len(cap["gpus"]) * len(cap["user_levels"])



def _check_cells(out: Path, design: dict, cells: list[dict]) -> None:  # type: ignore[type-arg]
    """Each cell re-planned as `llmcap plan` plans it; its row and overview cell in the HTML are that plan's."""
    tables = parse((out / "design.html").read_text()).tables
    for c in cells:
        try:
            p = plan_for(DEV, c["sets"])
        except Exception as e:  # noqa: BLE001 - the cell must then say infeasible
            assert not c["feasible"] and e.__class__.__name__ == "NoFeasiblePlanError", c
            continue
        t = p.totals
        rows = {r[0]: r for r in tables[c["gpu"]][1:]}
        row = rows[f"{c['concurrent_users']:,}"]
        assert row[2:7] == [f"{sum(q.replicas for q in p.pools):,}", f"{t.gpus:,}", f"{t.instances:,}",
                            money(t.usd_per_month), usd(t.usd_per_million_output_tokens, cents=True)], c
        assert row[1].startswith(p.pools[0].instance_type)
        overview = {r[0]: r for r in tables["Overview: GPU $/month (GPUs) by concurrent users"][1:]}
        col = design["capacity"]["user_levels"].index(c["concurrent_users"]) + 1
        assert overview[c["gpu"]][col] == f"{money(t.usd_per_month)} ({t.gpus:,} GPUs)"


def test_capacity_numbers_at_100_users_are_plans(out: Path, design: dict) -> None:  # type: ignore[type-arg]
    _check_cells(out, design, [c for c in design["capacity"]["cells"] if c["concurrent_users"] == 100])


@pytest.mark.slow  # re-plans every cell of the table (about 30 plans with batching tuned, some 15 CPU s)
def test_every_capacity_number_is_plans(out: Path, design: dict) -> None:  # type: ignore[type-arg]
    _check_cells(out, design, design["capacity"]["cells"])


def test_a_cell_equals_the_plan_commands_json(design: dict) -> None:  # type: ignore[type-arg]
    c = next(c for c in design["capacity"]["cells"] if c["feasible"] and c["concurrent_users"] == 1000)
    args = ["plan", str(DEV), "--format", "json"]
    for s in c["sets"]:
        args += ["--set", s]
    code, stdout, err = cli(*args)
    assert code == 0, err
    p = Plan.from_json(stdout)
    assert (c["gpus"], c["instances"], c["usd_per_month"], c["usd_per_million_output_tokens"]) == (
        p.totals.gpus, p.totals.instances, p.totals.usd_per_month, p.totals.usd_per_million_output_tokens)


def test_summary_and_cost_are_the_stacks_plan(out: Path, design: dict) -> None:  # type: ignore[type-arg]
    p = plan_for(DEV)
    assert Plan.model_validate(design["plan"]).totals == p.totals
    html = (out / "design.html").read_text()
    summary = html.split('<section id="summary">')[1].split("</section>")[0]
    assert f"{money(p.totals.usd_per_month)}/month" in summary
    assert usd(p.totals.usd_per_million_output_tokens, cents=True) in summary
    lines = parse(html).tables["Every line of the plan"][1:]
    assert [r[0] for r in lines] == [c.name for c in p.cost_lines]
    assert [r[2] for r in lines] == [money(c.usd_per_month) for c in p.cost_lines]


def test_purchase_options_and_request_classes_are_the_plans(out: Path) -> None:
    """The cost section carries the plan's own fleet under each way of paying (issue 28's purchase_options, each
    rate with its source and date) and the requirements its request classes with their predicted percentiles
    (issue 33), as `llmcap plan` prints them: formatted once, by sizing.report.plan_views."""
    from sizing.report.plan_views import class_rows, purchase_rows

    p = plan_for(DEV)
    tables = parse((out / "design.html").read_text()).tables
    paying = tables["The planned fleet under each way of paying (each rate with its source and date)"][1:]
    assert paying == purchase_rows(p) and any(r[0] == "on-demand" for r in paying)
    classes = tables["Request classes: targets and the planned fleet's predicted percentiles"][1:]
    assert classes == class_rows(p) and len(classes) == len(p.classes) >= 1


def test_html_loads_nothing_from_the_network(out: Path) -> None:
    html = (out / "design.html").read_text()
    assert external_loads(html) == []
    assert "<svg" in html  # the figures are inline


def test_the_network_check_finds_a_cdn() -> None:
    bad = ('<html><head><link rel="stylesheet" href="https://cdn.example/x.css"><style>@import "y.css";</style>'
           '</head><body><img src="//cdn.example/a.png"><a href="#ok">x</a></body></html>')
    got = external_loads(bad)
    assert any("https://cdn.example/x.css" in g for g in got) and any("//cdn.example/a.png" in g for g in got)
    assert "CSS url() or @import" in got and not any("#ok" in g for g in got)


def test_rollout_section_lists_the_stages_with_thresholds(out: Path) -> None:
    tables = parse((out / "design.html").read_text()).tables
    stages = [k for k in tables if k.split(":")[0] in ("canary", "ten-percent", "full")]
    assert [s.split(":")[0] for s in stages] == ["canary", "ten-percent", "full"]
    assert any(r[0].startswith("quality:") for r in tables[stages[0]])


def test_a_bad_stack_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    code, _, err = cli("report", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "doc"))
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / "doc").exists()


def test_rate_based_stack_keeps_its_own_traffic_and_infeasible_reasons() -> None:
    from sizing.analysis.capacity import capacity_table
    from sizing.errors import NoFeasiblePlanError

    p = plan_for(ROOT / "stacks" / "Pulumi.llama70b.yaml")
    assert p.workload.traffic.concurrent_users is None
    asked: list[list[str]] = []

    def plan_with(sets: list[str]) -> Plan:
        asked.append(sets)
        if sets[0] == "hardware.gpus=[L4]":
            raise NoFeasiblePlanError("none", ["no deployment meets the workload:", "L4: misses-itl: floor 81 ms"])
        return p

    table = capacity_table(p, ["L4", "H200", "B200"], plan_with)
    assert table.user_levels == [0, 10, 100, 1000] and table.gpus == ["L4", "H200", "B200"]
    assert ["hardware.gpus=[H200]"] in asked  # level 0: the stack's own rate, no users override
    assert ["hardware.gpus=[H200]", 'workload.traffic={"concurrent_users":100}'] in asked
    l4 = table.cell("L4", 100)
    assert not l4.feasible and l4.reason == "misses-itl: floor 81 ms"
