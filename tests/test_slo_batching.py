"""SLOs at any percentile (llmcap:workload.slo) and the planner's batching flags (sizing/planning/batching.py):
targets parse with one-line errors naming the field, the old p95 keys still read, goodput honours
every target, the plan reports p50/p95/p99 and the flags it chose, and says what binds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sizing.catalog.lookup import load_catalog
from sizing.cli import app
from sizing.perf.goodput import goodput
from sizing.perf.load import WorkloadShape
from sizing.perf.replica import ReplicaConfig
from sizing.planning.planner import plan_stack
from sizing.spec import Slo
from sizing.stack import load_stack

CAT = load_catalog()
runner = CliRunner()
STACK = """\
config:
  aws:region: us-east-1
  llmcap:workload:
    model: meta-llama/Meta-Llama-3-8B-Instruct
    precision: [fp8, bf16]
    prompt_tokens: 1024
    output_tokens: 512
    traffic:
      concurrent_users: 100
    slo:
{slo}
  llmcap:hardware:
    gpus: [H100-SXM, L40S]
"""


def _stack(tmp_path: Path, slo: str) -> Path:
    p = tmp_path / "Pulumi.t.yaml"
    p.write_text(STACK.format(slo="\n".join("      " + line for line in slo.splitlines())))
    return p


def test_old_p95_keys_still_read_and_mean_the_same_targets() -> None:
    old = Slo.model_validate({"ttft_p95_ms": 800, "itl_p95_ms": 30})
    new = Slo.model_validate({"ttft": {"p95": 800}, "itl": {"p95": 30}})
    assert old.targets() == new.targets() == (("ttft", "p95", 800.0), ("itl", "p95", 30.0))
    assert (new.ttft_p95_ms, new.itl_p95_ms) == (800.0, 30.0)


def test_any_percentile_of_any_metric(tmp_path: Path) -> None:
    st = load_stack(_stack(tmp_path, "ttft: {p99: 2000}\nitl: {p50: 20, p99: 60}\ntpot: {p50: 30}\ne2e: {p95: 30000}"))
    assert st.workload.slo.targets() == (("ttft", "p99", 2000.0), ("itl", "p50", 20.0), ("itl", "p99", 60.0),
                                         ("tpot", "p50", 30.0), ("e2e", "p95", 30000.0))


@pytest.mark.parametrize(("slo", "line"), [
    ("ttft: {p96: 1000}", "llmcap:workload.slo.ttft.p96: unknown key"),
    ("itl: {}", "llmcap:workload.slo.itl: give at least one percentile target"),
    ("itl: {p50: 80, p99: 50}", "llmcap:workload.slo.itl: p50 target (80 ms) is above the p99 target"),
    ("tpot: {p50: -3}", "llmcap:workload.slo.tpot.p50: Input should be greater than 0"),
    ("ttft_p95_ms: 900\nttft: {p95: 800}", "llmcap:workload.slo: ttft_p95_ms (900) and ttft.p95 (800) disagree"),
])
def test_bad_targets_give_one_line_naming_the_field(tmp_path: Path, slo: str, line: str) -> None:
    r = runner.invoke(app, ["validate", str(_stack(tmp_path, slo))])
    assert r.exit_code == 2, r.output
    assert line in r.output and "Traceback" not in r.output


def test_goodput_honours_a_p99_itl_target_and_a_tighter_one_gives_less() -> None:
    cfg = ReplicaConfig(CAT.model("llama-3.1-8b-instruct"), "H100-SXM", "fp8")
    shape = WorkloadShape(1024, 512)
    loose = goodput(CAT, cfg, shape, 1000, 50, targets=(("ttft", "p95", 1000.0), ("itl", "p99", 50.0)))
    tight = goodput(CAT, cfg, shape, 1000, 50, targets=(("ttft", "p95", 1000.0), ("itl", "p99", 25.0)))
    assert loose.feasible and tight.feasible
    assert tight.at is not None and tight.at.itl_p99_ms <= 25.0
    assert tight.output_tokens_per_s < loose.output_tokens_per_s


def test_plan_reports_percentiles_tuned_flags_and_what_binds(tmp_path: Path) -> None:
    st = load_stack(_stack(tmp_path, "ttft: {p95: 1000}\nitl: {p95: 25}"))
    plan = plan_stack(st, goodput_scale=None)
    pool = plan.pools[0]
    r = pool.per_replica
    assert 0 < r.ttft_p50_ms <= r.ttft_p95_ms <= r.ttft_p99_ms
    assert 0 < r.itl_p50_ms <= r.itl_p95_ms <= r.itl_p99_ms
    assert 0 < r.e2e_p50_ms <= r.e2e_p95_ms <= r.e2e_p99_ms
    assert r.simulated_at_goodput_ms["itl_p95_ms"] <= 25.0 and r.simulated_at_goodput_ms["ttft_p95_ms"] <= 1000.0
    assert "max_num_batched_tokens" in r.batching and pool.vllm.max_num_batched_tokens in (
        512, 1024, 2048, 4096, 8192, 16384)
    assert r.bound in ("itl-tail", "ttft-queueing", "kv-capacity", "engine-limit") and r.binds
    untuned = plan_stack(st, goodput_scale=None, tune_batching=False)
    assert untuned.pools[0].per_replica.batching == "" and untuned.pools[0].vllm.max_num_batched_tokens == 8192


def test_a_tight_itl_tail_chooses_a_smaller_prefill_budget(tmp_path: Path) -> None:
    # long prompts, short outputs, an ITL p99 target: whole-prompt chunks in a step break the tail
    p = _stack(tmp_path, "ttft: {p95: 3000}\nitl: {p99: 30}")
    p.write_text(p.read_text().replace("prompt_tokens: 1024", "prompt_tokens: 6000")
                 .replace("output_tokens: 512", "output_tokens: 200").replace("[H100-SXM, L40S]", "[H100-SXM]"))
    st = load_stack(p)
    plan = plan_stack(st, goodput_scale=None)
    r = plan.pools[0].per_replica
    assert plan.pools[0].vllm.max_num_batched_tokens < 8192, r.batching
    assert r.simulated_at_goodput_ms["itl_p99_ms"] <= 30.0
    untuned = plan_stack(st, goodput_scale=None, tune_batching=False)
    assert plan.totals.usd_per_month < untuned.totals.usd_per_month


def test_estimate_simulates_at_the_same_load_and_takes_the_flags() -> None:
    import json

    base = ["estimate", "--model", "llama-3.1-8b-instruct", "--gpu", "H100-SXM", "--precision", "fp8",
            "--concurrency", "32", "--format", "json"]
    r = runner.invoke(app, [*base, "--simulate", "--max-num-batched-tokens", "1024"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["sim_arrivals"] == "closed 32" and d["sim_ttft_p50_ms"] <= d["sim_ttft_p99_ms"]
    assert d["sim_output_tokens_per_s"] == pytest.approx(d["output_tokens_per_s"], rel=0.12)
    plain = json.loads(runner.invoke(app, base).output)
    assert "sim_itl_p95_ms" not in plain
    bad = runner.invoke(app, [*base, "--max-num-batched-tokens", "0"])
    assert bad.exit_code == 2 and "--max-num-batched-tokens: must be" in bad.output


H100_100_USERS = """\
config:
  aws:region: us-east-1
  llmcap:workload:
    model: meta-llama/Meta-Llama-3-8B-Instruct
    precision: [fp16]
    prompt_tokens: 1024
    output_tokens: 512
    traffic:
      concurrent_users: 100
    slo:
      ttft_p95_ms: 1000
      itl_p95_ms: {itl}
  llmcap:hardware:
    gpus: [H100-SXM]
    redundancy: 0
"""


def _itl_at(users: int, max_num_batched_tokens: int | None, max_num_seqs: int | None) -> tuple[bool, float, float]:
    """One H100 simulated at `users` closed-loop users of 1,024 / 512 tokens with these flags: (stable,
    ITL p95 ms, TTFT p95 ms)."""
    from sizing.perf.sim import Arrivals, Lengths, simulate

    cfg = ReplicaConfig(model=CAT.model("meta-llama/Meta-Llama-3-8B-Instruct"), gpu="H100-SXM", precision="fp16",
                        max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs)
    r = simulate(CAT, cfg, Lengths(1024, 1024), Lengths(512, 512), Arrivals.closed(users), 0.0, seed=0)
    return r.stable, r.percentile("itl", "p95"), r.percentile("ttft", "p95")


def test_the_search_simulates_the_concurrency_the_user_asked(tmp_path: Path) -> None:
    """Issue 31 item 5: Llama-3-8B on H100 at 100 users. The lattice steps 91 -> 108 users; at 108 the
    ITL p95 misses the target and at 100 (never tried) it meets it, so the plan took 2 GPUs where its
    own estimate needs 1. The search now simulates the demand's per-replica load in that gap.

    Targets across the gap between 100 and 108 users: whenever the flags the plan chose meet the target
    at 100 users on one GPU, the plan holds the 100 users on one; and at least one target is met only at
    the demand's own 100 (the path the lattice alone never took)."""
    def plan_at(itl: float) -> Any:
        p = tmp_path / "Pulumi.h100.yaml"
        p.write_text(H100_100_USERS.format(itl=itl))
        return plan_stack(load_stack(p), goodput_scale=None).pools[0]

    # the flags the planner picks when ITL is tight (about 29 ms: a small token budget), and what one GPU
    # simulates with them at 100 and at 108 users (the lattice's next load): read from the model itself,
    # so a refit of the constants moves the targets with it (pinned 29 ms, then 29.1 ms, each stopped
    # sitting in the gap after a refit)
    tight = plan_at(29.1).vllm
    flags = (tight.max_num_batched_tokens, tight.max_num_seqs)
    lo, hi = _itl_at(100, *flags)[1], _itl_at(108, *flags)[1]
    assert lo < hi, f"no ITL gap between 100 and 108 users to test with flags {flags}: {lo}, {hi}"
    gap_taken = []
    for f in (0.2, 0.5, 0.8):
        itl = round(lo + (hi - lo) * f, 3)
        pool = plan_at(itl)
        stable, itl_100, ttft_100 = _itl_at(100, pool.vllm.max_num_batched_tokens, pool.vllm.max_num_seqs)
        if stable and itl_100 <= itl and ttft_100 <= 1000:
            assert pool.replicas_for_demand == 1, (itl, pool.per_replica.binds)
        gap_taken.append("met at 100 concurrent requests" in pool.per_replica.binds)
    assert any(gap_taken), f"no target in {lo:.2f}-{hi:.2f} ms took the demand's own load"


def test_demand_points_lie_between_the_lattice_loads_largest_first() -> None:
    from sizing.planning.batching import DEMAND_TRIES, demand_points

    assert demand_points(100, 91, 108, integer=True) == [100.0]  # one replica holds all 100 users
    assert demand_points(200, 91, 108, integer=True) == [100.0]  # two replicas of 100
    assert demand_points(300, 91, 108, integer=True) == [100.0]  # three
    assert demand_points(100, 108, 128, integer=True) == []  # the lattice met above the demand: nothing to add
    assert demand_points(None, 91, 108, integer=True) == []
    pts = demand_points(1000, 30, 40, integer=True)  # 34 (30 replicas), 33, 32, 31 ...: DEMAND_TRIES, largest first
    assert pts == sorted(pts, reverse=True) and len(pts) == DEMAND_TRIES and all(30 < x < 40 for x in pts)
    assert demand_points(10.0, 4.0, 4.76, integer=False) == []  # 10/2 = 5 > 4.76, 10/3 < 4
    assert demand_points(9.0, 4.0, 4.76, integer=False) == [4.5]
