"""The load generator against a local streaming server with injected latencies and errors.

Tolerance: injected - 2 ms <= measured <= injected × 1.3 + 10 ms at p50 (× 1.6 + 10 ms at p95), ±30% for
throughput (tests/bench_helpers.py), generous for a loaded 2-core CI machine; each run lasts 0.5-2 s."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from sizing.errors import SpecError
from sizing.measure.client import RunLimits, Target, normalize_endpoint, run_load
from sizing.measure.metrics import RequestRecord, aggregate, percentile
from sizing.measure.workload import LengthSampler, RequestFactory, load_points
from sizing.spec import TokenLength, WorkloadSpec
from tests.bench_helpers import TIMING_EARLY_MS, TIMING_SLACK_MS, TIMING_TOLERANCE, TIMING_TOLERANCE_P95
from tests.fake_openai_server import FakeServer, FakeServerConfig


def workload(prompt: int = 40, output: int = 20, output_p95: int | None = None, users: int = 4,
             hit_rate: float = 0.0) -> WorkloadSpec:
    return WorkloadSpec.model_validate({
        "model": "m", "prompt_tokens": {"mean": prompt}, "output_tokens": {"mean": output, "p95": output_p95},
        "traffic": {"concurrent_users": users}, "slo": {"ttft_p95_ms": 400, "itl_p95_ms": 20},
        "prefix_cache_hit_rate": hit_rate})


def near(measured: float | None, injected_ms: float, tolerance: float = TIMING_TOLERANCE) -> bool:
    return measured is not None and injected_ms - TIMING_EARLY_MS <= measured \
        <= injected_ms * (1 + tolerance) + TIMING_SLACK_MS


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    cfg = getattr(request, "param", FakeServerConfig(ttft_s=0.2, itl_s=0.01))
    s = FakeServer(cfg).start()
    yield s
    s.stop()


def test_closed_loop_matches_injected_ttft_itl_and_throughput(server: FakeServer) -> None:
    w = workload(output=20, users=4)
    recs = run_load(Target(server.url, "fake-model"), RequestFactory(w), "concurrency", 4,
                    RunLimits(duration_s=2.0, request_timeout_s=10))
    # SLOs 5x the injected latencies: every request meets them even on a loaded 2-core machine (scheduling
    # jitter put a request's ITL p95 past a 2x target), so the last assert tests the counting, not the clock
    m = aggregate(recs, mode="concurrency", load=4, duration_s=2.0, slo_ttft_ms=1000, slo_itl_ms=50)
    assert m.errors == 0 and m.completed == len(recs) == server.requests, m.error_kinds
    assert near(m.ttft_ms.p50, 200) and near(m.ttft_ms.p95, 200, TIMING_TOLERANCE_P95), m.ttft_ms
    assert near(m.itl_ms.p50, 10) and near(m.itl_ms.p95, 10, TIMING_TOLERANCE_P95), m.itl_ms
    assert near(m.tpot_ms.mean, 10), m.tpot_ms
    assert m.output_tokens_counted_by == "server" and m.output_tokens_mean == 20
    # closed loop: N × tokens / (TTFT + (tokens - 1) × ITL) = 4 × 20 / 0.39 s = 205 tokens/s
    expected = 4 * 20 / (0.2 + 19 * 0.01)
    assert expected * (1 - TIMING_TOLERANCE) <= m.output_tokens_per_s <= expected * (1 + TIMING_TOLERANCE)
    assert 3.0 <= m.achieved_concurrency <= 4.0
    assert m.meets_slo and m.good_requests == m.completed


def test_open_loop_sends_the_seeded_poisson_arrivals(server: FakeServer) -> None:
    rate, duration, seed = 15.0, 1.5, 7
    rng, t, expected_sent = random.Random(seed), 0.0, 0
    while (t := t + rng.expovariate(rate)) < duration:
        expected_sent += 1
    recs = run_load(Target(server.url, "fake-model"), RequestFactory(workload(output=5)), "rate", rate,
                    RunLimits(duration_s=duration, request_timeout_s=10), seed=seed)
    m = aggregate(recs, mode="rate", load=rate, duration_s=duration, slo_ttft_ms=400, slo_itl_ms=20)
    assert m.requests_sent == expected_sent and m.errors == 0, m.error_kinds
    assert near(m.ttft_ms.p50, 200) and near(m.itl_ms.p50, 10)
    # open loop: throughput ≈ arrivals × tokens over the wall time (issuing window + one request's drain)
    wall_expected = max(r.start_s for r in recs) + 0.2 + 4 * 0.01
    assert m.output_tokens_per_s == pytest.approx(expected_sent * 5 / wall_expected, rel=TIMING_TOLERANCE)


@pytest.mark.parametrize("server", [FakeServerConfig(ttft_s=0.02, itl_s=0.005, error_every=4)], indirect=True)
def test_errors_are_counted_not_raised(server: FakeServer) -> None:
    recs = run_load(Target(server.url, "fake-model"), RequestFactory(workload(output=5)), "concurrency", 3,
                    RunLimits(duration_s=1.0, request_timeout_s=10))
    # SLOs 20x and 40x the injected latencies: on a loaded CI machine one token once took more than 20 ms
    # (CI of stop 27), so a tight ITL target made this test of the error counting fail on the clock
    m = aggregate(recs, mode="concurrency", load=3, duration_s=1.0, slo_ttft_ms=400, slo_itl_ms=200)
    assert m.errors == server.requests // 4 > 0, m.error_kinds
    assert m.error_kinds == {"http-500": m.errors}
    assert m.completed == m.requests_sent - m.errors
    assert not m.meets_slo  # 25% errors is above the 1% that meeting the SLO allows
    assert m.good_requests == m.completed  # latencies are fine; the failed requests are simply not good


@pytest.mark.parametrize("server", [FakeServerConfig(ttft_s=0.01, itl_s=0.002, send_usage=False)], indirect=True)
def test_without_usage_tokens_are_counted_from_chunks(server: FakeServer) -> None:
    w = workload(prompt=30, output=8)
    recs = run_load(Target(server.url, "fake-model", api="chat"), RequestFactory(w), "concurrency", 2,
                    RunLimits(duration_s=0.5, request_timeout_s=10))
    m = aggregate(recs, mode="concurrency", load=2, duration_s=0.5, slo_ttft_ms=400, slo_itl_ms=20)
    assert m.output_tokens_counted_by == "chunks" and m.output_tokens_mean == 8
    assert m.prompt_tokens_counted_by == "target" and m.prompt_tokens_mean == 30
    assert all("messages" in b and b["ignore_eos"] is True and b["stream"] is True for b in server.bodies)


@pytest.mark.parametrize("server", [FakeServerConfig(ttft_s=0.05, itl_s=0.2)], indirect=True)
def test_a_slow_stream_is_cut_at_the_request_timeout(server: FakeServer) -> None:
    """The timeout bounds send-to-last-token, not each read: a server trickling tokens cannot hold a run."""
    recs = run_load(Target(server.url, "fake-model"), RequestFactory(workload(output=50)), "concurrency", 1,
                    RunLimits(duration_s=0.1, request_timeout_s=0.5))
    assert len(recs) == 1 and not recs[0].success and recs[0].error.startswith("timeout")
    assert recs[0].e2e_s < 2.0


def test_requests_are_bounded_by_max_requests(server: FakeServer) -> None:
    recs = run_load(Target(server.url, "fake-model"), RequestFactory(workload(output=2)), "concurrency", 2,
                    RunLimits(duration_s=30.0, request_timeout_s=10, max_requests=5))
    assert len(recs) == 5 == server.requests


def test_request_body_carries_model_lengths_and_unique_prompts(server: FakeServer) -> None:
    run_load(Target(server.url, "served-name"), RequestFactory(workload(prompt=50, output=3), seed=3),
             "concurrency", 1, RunLimits(duration_s=30.0, request_timeout_s=10, max_requests=3))
    bodies = server.bodies
    assert [b["model"] for b in bodies] == ["served-name"] * 3
    assert all(b["max_tokens"] == 3 and b["stream_options"] == {"include_usage": True} for b in bodies)
    assert len({b["prompt"] for b in bodies}) == 3  # random words: no accidental prefix-cache hits


def test_metrics_follow_vllm_definitions() -> None:
    ok = RequestRecord(start_s=0.0, prompt_tokens_target=10, output_tokens_target=11, success=True, ttft_s=0.2,
                       e2e_s=1.2, itls_s=[0.1] * 10, chunks=11, output_tokens_server=11)
    slow = RequestRecord(start_s=0.5, prompt_tokens_target=10, output_tokens_target=11, success=True, ttft_s=0.9,
                         e2e_s=1.5, itls_s=[0.06] * 10, chunks=11, output_tokens_server=11)
    bad = RequestRecord(start_s=1.0, prompt_tokens_target=10, output_tokens_target=11, error="http-503: busy",
                        e2e_s=0.1)
    m = aggregate([ok, slow, bad], mode="concurrency", load=2, duration_s=1.0, slo_ttft_ms=500, slo_itl_ms=150)
    assert ok.tpot_s == pytest.approx(0.1)  # (1.2 - 0.2) / (11 - 1)
    assert m.wall_s == pytest.approx(2.0)  # first start 0.0 -> last end 0.5 + 1.5
    assert m.good_requests == 1  # `slow` misses TTFT; `bad` failed
    assert m.goodput_requests_per_s == pytest.approx(0.5)
    assert m.output_tokens_per_s == pytest.approx(22 / 2.0)
    assert m.error_rate == pytest.approx(1 / 3) and m.error_kinds == {"http-503": 1}
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)  # numpy's linear interpolation
    assert m.itl_ms.samples == 20


def test_length_sampler_hits_mean_and_p95() -> None:
    s = LengthSampler.of(TokenLength(mean=512, p95=1024))
    rng = random.Random(0)
    draws = [s.draw(rng) for _ in range(20_000)]
    assert sum(draws) / len(draws) == pytest.approx(512, rel=0.05)
    assert percentile([float(d) for d in draws], 95) == pytest.approx(1024, rel=0.05)
    assert LengthSampler.of(TokenLength(mean=100)).draw(rng) == 100


def test_prefix_share_follows_the_spec() -> None:
    f = RequestFactory(workload(prompt=100, hit_rate=0.5))
    a, b = f.next().prompt.split(), f.next().prompt.split()
    assert a[:50] == b[:50] and a[50:] != b[50:]


def test_load_points_default_to_the_planned_load_and_a_sweep() -> None:
    w = workload(users=40)
    assert [(p.load, p.planned) for p in load_points(w, None, None, True)] == [(20, False), (40, True), (60, False)]
    assert [p.load for p in load_points(w, None, None, False, demand_share=0.25)] == [10]
    assert [p.load for p in load_points(w, [3, 5], None, True)] == [3, 5]
    with pytest.raises(SpecError, match="not both"):
        load_points(w, [3], [1.0], True)
    rate_w = WorkloadSpec.model_validate({"model": "m", "prompt_tokens": 10, "output_tokens": 10,
                                          "traffic": {"peak_requests_per_s": 8}})
    assert [(p.mode, p.load) for p in load_points(rate_w, None, None, True)] == [
        ("rate", 4.0), ("rate", 8.0), ("rate", 12.0)]


@pytest.mark.parametrize("given, base", [("http://h:8000", "http://h:8000"), ("http://h:8000/v1/", "http://h:8000"),
                                         ("https://r.example/api/v1", "https://r.example/api")])
def test_endpoint_normalization(given: str, base: str) -> None:
    assert normalize_endpoint(given) == base


def test_endpoint_must_be_http() -> None:
    with pytest.raises(SpecError, match="http"):
        normalize_endpoint("127.0.0.1:8000")
