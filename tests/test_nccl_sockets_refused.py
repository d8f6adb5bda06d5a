"""Issue 28 item 3 (cap4): a multi-node pool on EFA whose engine image has no aws-ofi-nccl runs NCCL over TCP sockets
(Pool.inter_node_fabric "efa-sockets"), wasting the fabric the price includes. The fit check refuses it with one line
naming the fix, unless the stack accepts sockets with `llmcap:deployment.allow_nccl_sockets: true` (llama405b does:
no engine image at the pinned vLLM version carries the plugin; sizing/data/nccl_net_plugins.csv says why), and a
pool whose image carries the plugin ("efa") passes without it."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from infra.config import settings
from infra.fit.check import FitContext, check_deployable
from sizing.catalog.lookup import BUNDLED_DIR, load_catalog
from sizing.planning.planner import plan_stack
from sizing.stack import load_stack
from tests.test_pipeline_fabric import _with_plugin

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ROOT = Path(__file__).resolve().parent.parent
STACK = ROOT / "stacks" / "Pulumi.llama405b.yaml"
RULE = "multi-node-nccl-sockets"


def _problems(sets: list[str], catalog_dir: Path | None = None) -> list:
    cat = load_catalog(catalog_dir) if catalog_dir else load_catalog()
    stack = load_stack(STACK, sets)
    plan = plan_stack(stack, cat)
    return [p for p in check_deployable(FitContext(stack=stack, plan=plan, catalog=cat)).problems if p.rule == RULE]


def test_a_pool_on_efa_without_the_plugin_is_refused_with_the_fix() -> None:
    (p,) = _problems(["deployment.allow_nccl_sockets=false"])
    assert "\n" not in p.message
    for fix in ("aws-ofi-nccl", "infra/data/versions.yaml", "nccl_net_plugins.csv", "allow_nccl_sockets"):
        assert fix in p.message, p.message


def test_the_bundled_llama405b_accepts_sockets_explicitly() -> None:
    assert yaml.safe_load(STACK.read_text())["config"]["llmcap:deployment"]["allow_nccl_sockets"] is True
    assert _problems([]) == []
    cat = load_catalog()
    stack = load_stack(STACK)
    rows = check_deployable(FitContext(stack=stack, plan=plan_stack(stack, cat), catalog=cat)).rows
    (row,) = [r for r in rows if "NCCL between nodes" in r]
    assert str(row["NCCL between nodes"]).endswith("accepted by llmcap:deployment.allow_nccl_sockets")


def test_an_image_with_the_plugin_needs_no_opt_out(tmp_path: Path) -> None:
    assert _problems(["deployment.allow_nccl_sockets=false"], _with_plugin(tmp_path)) == []


def test_each_row_names_the_image_llmcap_pins() -> None:
    """nccl_net_plugins.csv speaks of the images infra/data/versions.yaml pins, so a bumped pin needs its row read
    again."""
    with (BUNDLED_DIR / "nccl_net_plugins.csv").open(newline="") as f:
        rows = {r["engine"]: r for r in csv.DictReader(f)}
    for engine, row in rows.items():
        img = settings.image(engine)
        assert row["image"] == f"{img.registry}/{img.image}:{img.tag}", engine
    vllm = rows["vllm"]["source"]
    # why there is no plugin to be had for the pinned vLLM: not in the image, not on the node, no DLC at the version
    assert "install-efa.sh" in vllm and "--minimal" in vllm and "deep-learning-containers" in vllm
    assert rows["sglang"]["aws_ofi_nccl"] in ("yes", "no", "unknown")
