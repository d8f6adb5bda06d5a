"""Issue 28 item 3: the performance model uses the fabric's bandwidth only when EFA is on, i.e. NCCL can use it. A
replica whose pipeline stages sit on different nodes sends each step's intermediate tensors between them: over EFA at
the instance's aggregate network bandwidth (every network card carries an EFA interface) when the engine image
carries aws-ofi-nccl (sizing/data/nccl_net_plugins.csv), else over TCP sockets on the interface of the primary
network card (its bandwidth, sizing/data/network_cards.csv), with EFA attached ("efa-sockets") or not ("ena")."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from sizing.catalog.lookup import BUNDLED_DIR, load_catalog
from sizing.perf.fabric import node_fabric
from sizing.perf.load import WorkloadShape, _build_ctx
from sizing.perf.replica import ReplicaConfig
from sizing.planning.planner import plan_for

ROOT = Path(__file__).resolve().parent.parent


def _with_plugin(tmp_path: Path) -> Path:
    """A catalog whose vLLM image carries aws-ofi-nccl (nccl_net_plugins.csv `yes`)."""
    d = tmp_path / "plugin"
    d.mkdir(exist_ok=True)
    with (BUNDLED_DIR / "nccl_net_plugins.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["engine"] == "vllm":
            r["aws_ofi_nccl"] = "yes"
    with (d / "nccl_net_plugins.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return d


def test_fabric_is_efa_only_on_an_efa_type_with_aws_ofi_nccl_across_nodes(tmp_path: Path) -> None:
    cat = load_catalog()
    p5 = cat.instances["p5.48xlarge"]
    assert node_fabric(cat, p5, nodes=1) is None  # one node: no inter-node traffic
    # the pinned vLLM image has no aws-ofi-nccl: EFA attached, NCCL on sockets over card 0
    # (p5.48xlarge: 32 network cards of 100 Gbps, DescribeInstanceTypes NetworkCards[0].BaselineBandwidthInGbps)
    sockets = node_fabric(cat, p5, nodes=2, engine="vllm")
    assert sockets is not None and (sockets.name, sockets.gbps) == ("efa-sockets", 100.0)
    assert "no aws-ofi-nccl" in sockets.source
    plugin = load_catalog(_with_plugin(tmp_path))
    efa = node_fabric(plugin, p5, nodes=2, engine="vllm")
    assert efa is not None and (efa.name, efa.gbps) == ("efa", p5.network_gbps) == ("efa", 3200.0)
    ena = node_fabric(plugin, replace(p5, efa=False), nodes=2, engine="vllm")
    assert ena is not None and (ena.name, ena.gbps) == ("ena", 100.0)
    assert "network_cards.csv" in ena.source and "instances.csv" in efa.source


def _step_s(fabric: str | None, gbps: float | None, tokens: float) -> float:
    cat = load_catalog()
    cfg = ReplicaConfig(model=cat.model("meta-llama/Llama-3.1-405B-Instruct"), gpu="H100-SXM", precision="fp8",
                        tp=8, pp=2, interconnect="nvlink", fabric=fabric, fabric_gbps=gbps)
    sm = _build_ctx(cat, cfg, WorkloadShape(prompt_tokens=1000, output_tokens=200)).sm
    return sm.step_s(decode_seqs=tokens, ctx_tokens=1100.0)


def test_inter_node_transfer_costs_bytes_over_the_fabric() -> None:
    cat = load_catalog()
    hidden = cat.model("meta-llama/Llama-3.1-405B-Instruct").hidden_size
    none, efa, ena = (_step_s(None, None, 256), _step_s("efa", 3200.0, 256), _step_s("ena", 100.0, 256))
    # vLLM sends hidden_states and residual (bf16) per token across the one stage boundary (pp - 1 = 1)
    per_token = 2 * hidden * 2
    assert ena - none == pytest.approx(256 * per_token / (100e9 / 8), rel=1e-6)
    assert efa - none == pytest.approx(256 * per_token / (3200e9 / 8), rel=1e-6)
    assert ena > efa > none


def _without_efa(tmp_path: Path) -> Path:
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
    return d


def test_a_multi_node_replica_without_nccl_over_efa_is_slower_and_the_plan_says_which_fabric(tmp_path: Path) -> None:
    stack = ROOT / "stacks" / "Pulumi.llama405b.yaml"
    (sockets,) = plan_for(stack).pools  # the pinned vLLM image: no aws-ofi-nccl
    (efa,) = plan_for(stack, catalog=_with_plugin(tmp_path)).pools
    (ena,) = plan_for(stack, catalog=_without_efa(tmp_path)).pools
    assert efa.nodes_per_replica == sockets.nodes_per_replica == ena.nodes_per_replica == 2
    assert (efa.inter_node_fabric, efa.inter_node_gbps) == ("efa", 3200.0)
    assert (sockets.inter_node_fabric, sockets.inter_node_gbps) == ("efa-sockets", 100.0)
    assert (ena.inter_node_fabric, ena.inter_node_gbps) == ("ena", 100.0)
    for slow in (sockets, ena):
        assert slow.per_replica.goodput_output_tokens_per_s < efa.per_replica.goodput_output_tokens_per_s
        assert slow.per_replica.ttft_ms > efa.per_replica.ttft_ms
    said = plan_for(stack).warnings
    assert any("over TCP sockets" in w and "no aws-ofi-nccl" in w for w in said), said
    said = plan_for(stack, catalog=_with_plugin(tmp_path)).warnings
    assert any("over EFA" in w and "3,200 Gbps" in w for w in said), said
