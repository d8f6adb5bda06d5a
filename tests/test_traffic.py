"""Planning from real traffic (issue 33): trace readers refuse bad input in one line, the trace's
statistics, the multi-replica replay, request classes, batch classes and trace stacks planned."""

from __future__ import annotations

import filecmp
import time
from pathlib import Path
from typing import Any

import pytest

from sizing.errors import SpecError
from sizing.plan import SCHEMA_VERSION
from sizing.traffic.reader import read_trace
from sizing.traffic.stats import trace_stats

TRACES = Path(__file__).parent / "data" / "traces"
# the project's shared/ beside the checkout, when it is there (the match test is skipped elsewhere)
SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
BUNDLED = ("azure2023_code.csv", "azure2023_conv.csv", "mooncake_conversation.jsonl", "mooncake_synthetic.jsonl")


@pytest.mark.parametrize("name", BUNDLED)
def test_vendored_trace_matches_shared(name: str) -> None:
    if not (SHARED / name).exists():
        pytest.skip("../shared/traces not present")
    assert filecmp.cmp(TRACES / name, SHARED / name, shallow=False)


def test_trace_stats_of_the_azure_code_trace() -> None:
    st = trace_stats(read_trace(TRACES / "azure2023_code.csv"))
    assert st.requests == 8819
    assert 3400 < st.span_s < 3450
    assert st.mean_requests_per_s == pytest.approx(2.567, abs=0.01)
    assert st.peak_requests_per_s_1s >= 67  # the busiest calendar second; a sliding window sees at least it
    assert st.peak_requests_per_s_60s >= 9.8
    assert st.prefix_reuse_share == 0.0


def test_time_scale_replays_faster() -> None:
    one = trace_stats(read_trace(TRACES / "azure2023_conv.csv"))
    two = trace_stats(read_trace(TRACES / "azure2023_conv.csv", time_scale=2))
    assert two.requests == one.requests and two.span_s == pytest.approx(one.span_s / 2, rel=1e-6)
    assert two.mean_requests_per_s == pytest.approx(2 * one.mean_requests_per_s, rel=1e-3)


def test_prefix_aware_routing_finds_more_of_the_cache() -> None:
    from sizing.catalog.lookup import load_catalog
    from sizing.perf.replay import replay
    from sizing.perf.replica import ReplicaConfig

    cat = load_catalog()
    cfg = ReplicaConfig(cat.model(MODEL), "L40S", "bf16", tp=1)
    tr = read_trace(TRACES / "mooncake_synthetic.jsonl")
    hits = {r: replay(cat, cfg, tr, 8, r).prefix_hit_share for r in ("round-robin", "least-loaded", "prefix-aware")}
    assert hits["prefix-aware"] > hits["least-loaded"] > 0 and hits["prefix-aware"] > hits["round-robin"] > 0
    assert max(hits.values()) < trace_stats(tr).prefix_reuse_share  # a real cache holds less than an unbounded one


def test_prefix_reuse_share_of_mooncake() -> None:
    def share(name: str) -> float:
        return trace_stats(read_trace(TRACES / name)).prefix_reuse_share

    assert share("mooncake_conversation.jsonl") == pytest.approx(0.37, abs=0.01)  # the 37%
    assert share("mooncake_synthetic.jsonl") == pytest.approx(0.65, abs=0.01)  # and 65%
    assert trace_stats(read_trace(TRACES / "mooncake_synthetic.jsonl", prefix_reuse=False)).prefix_reuse_share == 0.0


BAD: dict[str, tuple[bytes, str]] = {
    "unsorted": (b"arrival_s,prompt_tokens,output_tokens\n1.0,10,5\n0.5,10,5\n", "row 3: arrival_s: earlier"),
    "negative": (b"arrival_s,prompt_tokens,output_tokens\n0,-4,5\n", "row 2: prompt_tokens: -4 is outside"),
    "missing column": (b"arrival_s,prompt_tokens\n0,10\n", "header: missing column(s) output_tokens"),
    "binary": (b"\x00\xff\xfe" * 1000, "row 1: row: binary data"),
    "not utf8": (b"arrival_s,prompt_tokens,output_tokens\n0,\xff\xfe,1\n", "row 2: row: not UTF-8"),
    "junk json": (b'{"timestamp": 0, "input_length": 5, "output_length": 3, "hash_ids": []}\n{oops\n',
                  "row 2: row: not a JSON"),
    "mooncake field": (b'{"timestamp": 0, "input_length": 5, "hash_ids": []}\n', "row 1: output_length: missing"),
    "azure time": (b"TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,4,5\n", "row 2: TIMESTAMP: 'yesterday'"),
    "float tokens": (b"arrival_s,prompt_tokens,output_tokens\n0,10.5,5\n",
                     "row 2: prompt_tokens: '10.5' is not a whole"),
    "long line": (b"arrival_s,prompt_tokens,output_tokens\n" + b"9" * (2 * 1024 * 1024), "row 2: row: longer than"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_trace_refused_in_one_line(tmp_path: Path, case: str) -> None:
    data, want = BAD[case]
    f = tmp_path / "t.trace"
    f.write_bytes(data)
    with pytest.raises(SpecError) as e:
        read_trace(f)
    assert len(e.value.problems) == 1 and "\n" not in str(e.value)
    assert want in str(e.value), str(e.value)


def test_huge_trace_refused_before_reading(tmp_path: Path) -> None:
    f = tmp_path / "big.csv"
    with open(f, "wb") as fh:
        fh.truncate(2 * 1024 ** 3)  # a sparse 2 GB file
    with pytest.raises(SpecError, match="MiB is above"):
        read_trace(f)


def test_generic_jsonl_with_classes_and_prefix_ids(tmp_path: Path) -> None:
    f = tmp_path / "g.jsonl"
    f.write_text('{"arrival_s": 0.0, "prompt_tokens": 1024, "output_tokens": 10, "class": "chat", '
                 '"prefix_ids": [1, 2]}\n'
                 '{"arrival_s": 0.5, "prompt_tokens": 2048, "output_tokens": 20, "class": "rag", '
                 '"prefix_ids": [1, 2, 3, 4]}\n')
    t = read_trace(f, prefix_block_tokens=256)
    st = trace_stats(t)
    assert t.class_names == ("chat", "rag") and st.class_mix == {"chat": 0.5, "rag": 0.5}
    assert st.prefix_reuse_share == pytest.approx(512 / 3072, abs=1e-4)


# ---- planning ---------------------------------------------------------------------------------------

def _plan(workload: dict[str, Any], hardware: dict[str, Any] | None = None) -> Any:
    from sizing.catalog.lookup import load_catalog
    from sizing.planning.planner import plan_stack
    from sizing.stack import stack_from_config

    cfg = {"aws:region": "us-east-1", "llmcap:workload": workload,
           "llmcap:hardware": hardware or {"gpus": ["H100-SXM"], "redundancy": 0}}
    return plan_stack(stack_from_config("t", cfg, "test", TRACES), load_catalog(), goodput_scale=None)


MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_single_class_plan_carries_classes() -> None:
    p = _plan({"model": MODEL, "prompt_tokens": 1024, "output_tokens": 256,
               "traffic": {"peak_requests_per_s": 2}, "slo": {"ttft_p95_ms": 1000, "itl_p95_ms": 50}})
    assert [c.name for c in p.classes] == ["default"]
    c = p.classes[0]
    assert c.slo_met and c.ttft_ms.p95 <= 1000 and {t.metric for t in c.targets} == {"ttft", "itl"}
    assert p.trace is None and p.fleet is None and p.schema_version == SCHEMA_VERSION


def test_two_class_stack_plans_each_class() -> None:
    p = _plan({"model": MODEL, "traffic": {"peak_requests_per_s": 4}, "classes": [
        {"name": "chat", "prompt_tokens": 1024, "output_tokens": 256, "slo": {"ttft": {"p95": 500}}, "share": 0.7},
        {"name": "rag", "prompt_tokens": 8000, "output_tokens": 300, "slo": {"ttft": {"p95": 3000}}, "share": 0.3}]})
    by = {c.name: c for c in p.classes}
    assert set(by) == {"chat", "rag"}
    assert by["chat"].slo_met and by["chat"].ttft_ms.p95 <= 500
    assert by["rag"].slo_met and by["rag"].ttft_ms.p95 <= 3000
    assert by["rag"].ttft_ms.p50 > by["chat"].ttft_ms.p50  # 8k prompts take longer to first token
    assert p.fleet is not None and p.fleet.layout in ("shared", "dedicated") and p.fleet.why
    assert sum(x.replicas_for_demand for x in p.pools) == p.fleet.replicas


def test_batch_class_finishes_by_its_deadline() -> None:
    p = _plan({"model": MODEL, "classes": [
        {"name": "summarize", "prompt_tokens": 50000, "output_tokens": 500,
         "batch": {"requests": 10000, "deadline_hours": 4}}]})
    c = p.classes[0]
    assert c.kind == "batch" and c.deadline_hours == 4
    assert c.time_to_finish_hours is not None and 0 < c.time_to_finish_hours <= 4 and c.slo_met
    assert sum(x.replicas_for_demand for x in p.pools) == c.replicas
    # a quarter of the time needs more replicas, and they still finish in time
    q = _plan({"model": MODEL, "classes": [
        {"name": "summarize", "prompt_tokens": 50000, "output_tokens": 500,
         "batch": {"requests": 10000, "deadline_hours": 1}}]}).classes[0]
    assert q.replicas > c.replicas and q.time_to_finish_hours is not None and q.time_to_finish_hours <= 1


def _trace_stack(name: str, ttft_p95_ms: float = 3000, **trace: Any) -> dict[str, Any]:
    return {"model": MODEL, "trace": {"path": name, **trace}, "slo": {"ttft": {"p95": ttft_p95_ms}, "itl_p95_ms": 60}}


# one L40S per replica: small enough that the traces need several replicas, so the fleet comparisons bite
L40S = {"gpus": ["L40S"], "redundancy": 0}


@pytest.mark.parametrize("name", [BUNDLED[0], *(pytest.param(n, marks=pytest.mark.slow) for n in BUNDLED[1:])])
def test_trace_stack_plans(name: str) -> None:
    c0 = time.process_time()
    p = _plan(_trace_stack(name))
    cpu_s = time.process_time() - c0
    assert p.trace is not None and p.trace.requests > 1000
    assert p.trace.peak_requests_per_s_1s > p.trace.mean_requests_per_s
    assert p.fleet is not None and p.classes and all(c.slo_met for c in p.classes)
    assert p.fleet.replicas >= 1 and p.fleet.replays >= 1 and cpu_s < 60  # issue 33: a plan under 60 s


def test_bursty_code_trace_needs_at_least_its_mean_as_poisson() -> None:
    import numpy as np

    from sizing.catalog.lookup import load_catalog
    from sizing.perf.replay import replay
    from sizing.perf.replica import ReplicaConfig
    from sizing.planning.fleet import meets
    from sizing.traffic.reader import Trace

    p = _plan(_trace_stack("azure2023_code.csv", ttft_p95_ms=2000), L40S)
    assert p.fleet is not None and p.trace is not None
    n = p.fleet.replicas
    assert n > p.fleet.mean_based_replicas  # the bursts need more than the mean-rate plan
    tr = read_trace(TRACES / "azure2023_code.csv")
    rng = np.random.default_rng(0)
    poisson = Trace("poisson", np.cumsum(rng.exponential(1 / p.trace.mean_requests_per_s, tr.requests)),
                    tr.prompt_tokens, tr.output_tokens, tr.class_names, tr.class_index, None, 512)
    cat = load_catalog()
    pool = p.pools[0]
    cfg = ReplicaConfig(model=cat.model(MODEL), gpu=pool.gpu, precision=pool.precision, tp=pool.tensor_parallel,
                        max_num_seqs=pool.vllm.max_num_seqs, max_num_batched_tokens=pool.vllm.max_num_batched_tokens)
    targets = {"default": p.workload.slo.targets()}
    # the smallest fleet that holds the targets on a Poisson stream at the trace's mean rate
    k = 1
    while not meets(replay(cat, cfg, poisson, k), targets):
        k += 1
    assert n >= k > 0


def test_prefix_reuse_fleet_no_larger() -> None:
    # 15k-token prompts on one L40S each: a loose TTFT target keeps the analytic search feasible
    on = _plan(_trace_stack("mooncake_synthetic.jsonl", ttft_p95_ms=12000), L40S)
    off = _plan(_trace_stack("mooncake_synthetic.jsonl", ttft_p95_ms=12000, prefix_reuse=False), L40S)
    assert on.fleet is not None and off.fleet is not None
    assert on.fleet.replicas <= off.fleet.replicas
    assert on.trace is not None and on.trace.prefix_hit_share_planned > 0
    assert off.trace is not None and off.trace.prefix_hit_share_planned == 0


def test_bad_trace_in_a_stack_is_one_error_line(tmp_path: Path) -> None:
    from sizing.stack import stack_from_config

    (tmp_path / "t.csv").write_bytes(b"arrival_s,prompt_tokens,output_tokens\n1,10,5\n0,10,5\n")
    with pytest.raises(SpecError) as e:
        stack_from_config("t", {"llmcap:workload": {"model": MODEL, "trace": "t.csv"}}, "test", tmp_path)
    assert e.value.problems == ["llmcap:workload.trace: trace t.csv row 3: arrival_s: earlier than the row before; "
                                "sort the trace by arrival time"]


def test_scaled_object_takes_the_trace_plans_autoscaling() -> None:
    from infra.kubernetes import autoscaling
    from sizing.plan import FleetChoice
    from tests.plan_factory import make_plan, make_pool

    pool = make_pool(replicas=6)
    fleet = FleetChoice(layout="shared", why="one class", routing="least-loaded", replicas=6, mean_based_replicas=2,
                        difference="", replays=3,
                        autoscaling_min_replicas=4, autoscaling_max_replicas=12, warm_standby_replicas=3,
                        queue_threshold=7, autoscaling_why="quietest minute needs 1 replica(s) ...")
    plan = make_plan([pool], fleet=fleet)
    so = autoscaling.pool_scaled_object(pool, "llm", autoscaling.queue_threshold(plan, pool),
                                        autoscaling.min_replicas(plan, pool))
    assert so["spec"]["minReplicaCount"] == 4
    assert so["spec"]["triggers"][0]["metadata"]["threshold"] == str(max(7, _min_threshold()))
    # without a trace plan: the pool's replicas, as before
    plain = make_plan([pool])
    assert autoscaling.min_replicas(plain, pool) == 6


def _min_threshold() -> int:
    from infra.config import settings

    return int(settings.policy().autoscaling.minimum_threshold)


def test_cli_refuses_a_junk_trace_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "junk.csv").write_bytes(bytes(range(256)) * 8)
    stack = tmp_path / "Pulumi.junk.yaml"
    stack.write_text(f"config:\n  llmcap:workload:\n    model: {MODEL}\n    trace: junk.csv\n")
    r = subprocess.run([sys.executable, "-c", "from sizing.cli import main; main()", "plan", str(stack)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert lines == ["error: llmcap:workload.trace: trace junk.csv row 1: row: binary data (a NUL byte); "
                     "a trace is CSV or JSON lines text"], lines


def test_given_requests_replay_what_the_simulation_samples() -> None:
    """The sim hook: a burst replayed from the very lengths a sampled burst drew gives the same run."""
    import numpy as np

    from sizing.catalog.lookup import load_catalog
    from sizing.perf.replica import ReplicaConfig
    from sizing.perf.sim import Arrivals, GivenRequests, Lengths, simulate

    cat = load_catalog()
    cfg = ReplicaConfig(cat.model(MODEL), "L40S", "bf16", tp=1)
    prompt, output = Lengths(1024, 3000), Lengths(200, 600)
    sampled = simulate(cat, cfg, prompt, output, Arrivals.burst(200), seed=3)
    rng = np.random.default_rng(3)
    p = prompt.sample(rng, 200, 10_000_000)
    o = output.sample(rng, 200, 10_000_000)
    given = simulate(cat, cfg, prompt, output, Arrivals.burst(200),
                     requests=GivenRequests(np.zeros(200), p, o, np.zeros(200, dtype=np.int64)))
    assert given.ttft_ms == sampled.ttft_ms and given.e2e_ms == sampled.e2e_ms and given.steps == sampled.steps
    assert given.per_request is not None and sampled.per_request is None
    assert np.isfinite(given.per_request["last_token_s"]).all()
    with pytest.raises(ValueError, match="burst"):
        simulate(cat, cfg, prompt, output, Arrivals.poisson(1.0),
                 requests=GivenRequests(np.zeros(200), p, o, np.zeros(200, dtype=np.int64)))
