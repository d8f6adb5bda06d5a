"""GPU capacity you can actually get (issue 28): reservations and Capacity Blocks in the spec, the
plan and the program; purchase options side by side with their sources; EFA for multi-node pools."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from infra.aws.efa import efa_cards
from sizing.catalog.lookup import load_catalog
from sizing.catalog.paths import BUNDLED_DIR
from sizing.cli import app
from sizing.planning.planner import plan_stack
from sizing.report.plan_views import render_markdown
from sizing.spec import HardwareSpec
from sizing.stack import load_stack, stack_from_config
from tests import pulumi_harness as h
from tests.k8s_support import ROOT

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
runner = CliRunner()
BLOCK = "cr-0a1b2c3d4e5f60718"
LT = "aws:ec2/launchTemplate:LaunchTemplate"


def _block(**kw: object) -> dict[str, object]:
    return {"kind": "capacity-block", "id": BLOCK, "instance_type": "p5.48xlarge", "count": 2,
            "availability_zone_id": "use1-az6", "start": "2026-12-14", "end": "2027-01-14", **kw}


# --- the spec ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("entry", "hw", "says"), [
    (_block(end=None), {}, "needs its start and end"),
    (_block(id="cb-123"), {}, "is not a cr-... id"),
    (_block(availability_zone_id="us-east-1a"), {}, "is not an AZ ID"),
    (_block(end="2026-12-01"), {}, "is not after start"),
    (_block(), {"purchase": "mixed"}, "purchase: mixed is not supported"),
])
def test_bad_capacity_entries_are_refused(entry: dict[str, object], hw: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError) as e:
        HardwareSpec.model_validate({"capacity": [entry], **hw})
    assert says in str(e.value)


def test_a_reservation_may_name_a_resource_group() -> None:
    arn = "arn:aws:resource-groups:us-east-1:123456789012:group/gpu-odcrs"
    hw = HardwareSpec.model_validate({"capacity": [_block(kind="reservation", id=arn, start=None, end=None)]})
    assert hw.capacity[0].id == arn


# --- the plan ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def block_plan():  # type: ignore[no-untyped-def]
    stack = load_stack(ROOT / "stacks" / "Pulumi.llama70b-block.yaml")
    return plan_stack(stack, load_catalog())


def test_the_block_is_used_first_and_on_demand_covers_the_rest(block_plan) -> None:  # type: ignore[no-untyped-def]
    cb, rest = block_plan.pools
    assert (cb.purchase, cb.capacity_reservation_id, cb.availability_zone_id) == ("capacity-block", BLOCK, "use1-az6")
    assert cb.instances_desired == 2 and cb.instances_max == 2  # the block holds two instances, no more
    assert cb.capacity_ends == "2027-01-14"
    assert cb.usd_per_instance_hour == load_catalog().price("p5.48xlarge", "us-east-1", "capacity-block").usd_per_hour
    assert rest.purchase == "on-demand" and rest.capacity_reservation_id is None
    assert cb.replicas + rest.replicas == sum(p.replicas for p in block_plan.pools)
    assert f"capacity block {BLOCK} ends 2027-01-14; after that the pool has no capacity" in block_plan.warnings
    assert any(w.startswith(f"capacity block {BLOCK}: set the node group's desired size to 0 before upgrading")
               for w in block_plan.warnings)
    # no 1-year Savings Plan rate for p5.48xlarge in the bundled data: said, and the rest priced on-demand
    assert any("no savings-plan-1yr rate for p5.48xlarge" in w for w in block_plan.warnings)
    assert rest.usd_per_instance_hour == load_catalog().price("p5.48xlarge", "us-east-1", "on-demand").usd_per_hour


def test_purchase_options_side_by_side_with_source_and_date(block_plan) -> None:  # type: ignore[no-untyped-def]
    cat = load_catalog()
    opts = {o.option: o for o in block_plan.purchase_options}
    assert list(opts) == ["on-demand", "spot", "reserved-1yr", "reserved-3yr", "savings-plan-1yr",
                          "savings-plan-3yr", "capacity-block"]
    n = sum(p.instances_desired for p in block_plan.pools)
    for kind in ("on-demand", "spot", "capacity-block"):
        price = cat.price("p5.48xlarge", "us-east-1", kind)
        assert opts[kind].usd_per_month == pytest.approx(n * price.usd_per_hour * 730, abs=0.01)
        assert opts[kind].source == price.source and opts[kind].as_of == price.as_of
    assert opts["savings-plan-1yr"].usd_per_month is None
    assert "not in the bundled data for p5.48xlarge" in opts["savings-plan-1yr"].note
    md = render_markdown(block_plan)
    assert "The same GPU fleet under each purchase option" in md and "ends 2027-01-14" in md


def test_a_commitment_prices_on_demand_instances_at_its_rate() -> None:
    cat = load_catalog()
    cfg = {"aws:region": "us-east-1",
           "llmcap:workload": {"model": "meta-llama/Meta-Llama-3-8B-Instruct", "prompt_tokens": 1024,
                               "output_tokens": 256, "traffic": {"peak_requests_per_s": 5}},
           "llmcap:hardware": {"instance_types": ["g6e.xlarge"], "commitment": "reserved-1yr"}}
    plan = plan_stack(stack_from_config("t", cfg), cat)
    ri = cat.price("g6e.xlarge", "us-east-1", "reserved-1yr")
    assert ri is not None and ri.usd_per_hour < cat.price("g6e.xlarge", "us-east-1", "on-demand").usd_per_hour
    (pool,) = plan.pools
    assert (pool.usd_per_instance_hour, pool.rate_basis) == (ri.usd_per_hour, "reserved-1yr")
    assert "at the reserved-1yr rate" in plan.cost_lines[0].name
    opts = {o.option: o for o in plan.purchase_options}
    assert opts["reserved-1yr"].usd_per_month == pytest.approx(plan.totals.usd_per_month, abs=0.01)


def test_bundled_reserved_and_block_rates_match_the_reference() -> None:
    ref = next((d / "shared" / "reference" for d in (ROOT.parent, ROOT.parent.parent)
                if (d / "shared" / "reference" / "aws_gpu_instances.csv").exists()), None)
    if ref is None:
        pytest.skip("../shared/reference is not here")
    cat = load_catalog()
    with (ref / "aws_gpu_instances.csv").open(newline="") as f:
        for r in csv.DictReader(f):
            ri = cat.price(r["instance_type"], "us-east-1", "reserved-1yr")
            want = r["ri_1yr_std_noupfront_usd_hr_us_east_1"]
            assert (ri.usd_per_hour if ri else None) == (float(want) if want else None), r["instance_type"]


# --- the program ------------------------------------------------------------------------------

def test_the_block_is_rendered_into_the_launch_template_and_node_group() -> None:
    res = h.bundled("llama70b-block")
    cb, rest = res.plan.pools
    lt = h.one(res, LT, f"{h.gpu_node_group_name(res, cb.name)}-lt").inputs
    assert lt["capacityReservationSpecification"] == {"capacityReservationTarget": {"capacityReservationId": BLOCK}}
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    ng = h.one(res, h.NODE_GROUP, h.gpu_node_group_name(res, cb.name)).inputs
    assert ng["capacityType"] == "CAPACITY_BLOCK"
    # the launch template names the instance type, the node group none (CreateNodegroup refuses both)
    assert lt["instanceType"] == "p5.48xlarge" and "instanceTypes" not in ng
    subnets = {r.id: r.inputs for r in res.of_type("aws:ec2/subnet:Subnet")}
    assert {subnets[s]["availabilityZoneId"] for s in ng["subnetIds"]} == {"use1-az6"}
    other = h.one(res, LT, f"{h.gpu_node_group_name(res, rest.name)}-lt").inputs
    assert "capacityReservationSpecification" not in other and "instanceMarketOptions" not in other
    assert h.one(res, h.NODE_GROUP, h.gpu_node_group_name(res, rest.name)).inputs["capacityType"] == "ON_DEMAND"


def test_llama405b_renders_efa_interfaces_and_a_placement_group() -> None:
    res = h.bundled("llama405b")
    (pool,) = res.plan.pools
    assert pool.nodes_per_replica > 1
    lt = h.one(res, LT, f"{h.gpu_node_group_name(res, pool.name)}-lt").inputs
    nics = lt["networkInterfaces"]
    assert len(nics) == efa_cards()[pool.instance_type].network_cards == 32
    assert (nics[0]["interfaceType"], nics[0]["deviceIndex"], nics[0]["networkCardIndex"]) == ("efa", 0, 0)
    assert all((n["interfaceType"], n["deviceIndex"]) == ("efa-only", 1) for n in nics[1:])
    assert [n["networkCardIndex"] for n in nics] == list(range(32))
    pg = h.one(res, "aws:ec2/placementGroup:PlacementGroup", f"{h.gpu_node_group_name(res, pool.name)}-pg")
    assert pg.inputs["strategy"] == "cluster" and lt["placement"]["groupName"] == pg.outputs["name"]
    sg = h.one(res, "aws:ec2/securityGroup:SecurityGroup", f"{h.gpu_node_group_name(res, pool.name)}-efa")
    for kind in ("Ingress", "Egress"):
        (rule,) = [r for r in res.of_type(f"aws:vpc/securityGroup{kind}Rule:SecurityGroup{kind}Rule")
                   if r.inputs.get("securityGroupId") == sg.id]
        assert rule.inputs["referencedSecurityGroupId"] == sg.id and rule.inputs["ipProtocol"] == "-1"
    assert all(sg.id in n["securityGroups"] for n in nics)
    ng = h.one(res, h.NODE_GROUP, h.gpu_node_group_name(res, pool.name)).inputs
    assert len(ng["subnetIds"]) == 1  # a cluster placement group is one AZ


def test_single_node_pools_get_no_efa() -> None:
    res = h.bundled("llama70b-block")
    assert not res.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert all("networkInterfaces" not in r.inputs for r in res.of_type(LT))


def test_multi_node_pool_without_efa_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "catalog"
    d.mkdir()
    with (BUNDLED_DIR / "instances.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["instance_type"] == "p5.48xlarge":
            r["efa"] = "no"
    with (d / "instances.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "out"
    r = runner.invoke(app, ["render", str(ROOT / "stacks" / "Pulumi.llama405b.yaml"), "--out", str(out),
                            "--catalog", str(d), "--fresh"], env={"COLUMNS": "250"})
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if "[multi-node-without-efa]" in ln]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "TCP" in lines[0], r.output
    assert "Traceback" not in r.output
    assert not out.exists() or not any(out.iterdir())


def test_efa_network_cards_match_the_catalog_and_moto() -> None:
    """infra/data/efa_network_cards.csv (scripts/build_bundled_catalog.py) lists exactly the catalog's EFA
    types, with moto's copy of DescribeInstanceTypes' network cards."""
    import gzip
    import json

    moto = pytest.importorskip("moto")
    cat = load_catalog()
    assert set(efa_cards()) == {t for t, i in cat.instances.items() if i.efa}
    with gzip.open(Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz") as f:
        info = json.load(f)
    for t, c in efa_cards().items():
        net = info[t]["NetworkInfo"]
        assert (c.network_cards, c.max_efa_interfaces) == (net["MaximumNetworkCards"],
                                                           net["EfaInfo"]["MaximumEfaInterfaces"]), t


def test_the_pr_comment_says_when_the_block_ends(block_plan) -> None:  # type: ignore[no-untyped-def]
    from sizing.analysis.diff import diff_plans
    from sizing.report.diff_views import render_markdown as diff_markdown

    md = diff_markdown(diff_plans(None, block_plan))
    assert f"capacity block {BLOCK} ends 2027-01-14; after that the pool has no capacity" in md


@pytest.mark.parametrize(("old", "new", "field", "says"), [
    ("        instance_type: p5.48xlarge\n", "        instance_type: p5.48xlarg\n", "instance_type",
     "did you mean p5.48xlarge"),
    ("use1-az6", "use1-az9", "availability_zone_id", "use1-az9 does not offer p5.48xlarge in us-east-1"),
])
def test_a_reservation_of_an_unknown_type_or_az_is_one_error_line(tmp_path: Path, old: str, new: str, field: str,
                                                                  says: str) -> None:
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text((ROOT / "stacks" / "Pulumi.llama70b-block.yaml").read_text().replace(old, new))
    r = runner.invoke(app, ["plan", str(bad)], env={"COLUMNS": "200"})
    assert r.exit_code == 2, r.output
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error: ")]
    assert errors == [ln for ln in errors if f"llmcap:hardware.capacity.0.{field}" in ln and says in ln], r.output
    assert len(errors) == 1 and "Traceback" not in r.output
