"""Shared pieces of the bench tests: a typer app with the bench commands, a stack file, a free port,
hand-built results. The commands are registered here so the tests do not depend on sizing/cli/__init__.py."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import typer

from sizing.cli import bench_cmds
from sizing.measure.metrics import Distribution, RunMetrics
from sizing.measure.results import BenchResults
from sizing.plan import Plan

# A measured latency may not be below the injected one (the server sleeps at least that long) by more
# than clock jitter, and may exceed it by 30% + 10 ms at p50, 60% + 10 ms at p95: connection set-up,
# scheduler wake-ups and SSE parsing on a loaded 2-core CI machine (at load average 8 we measured
# p50 244 ms and p95 271-308 ms for 200 ms injected, with 4 requests in flight).
TIMING_TOLERANCE = 0.30
TIMING_TOLERANCE_P95 = 0.60
TIMING_SLACK_MS = 10.0
TIMING_EARLY_MS = 2.0

STACK_YAML = """\
config:
  aws:region: us-east-1
  llmcap:workload:
    model: meta-llama/Meta-Llama-3-8B-Instruct
    precision: fp8
    prompt_tokens: {prompt}
    output_tokens: {output}
    traffic:
      concurrent_users: {users}
    slo:
      ttft_p95_ms: {ttft}
      itl_p95_ms: {itl}
"""


def bench_app() -> typer.Typer:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command("bench")(bench_cmds.bench)
    app.command("verify")(bench_cmds.verify)
    app.command("calibrate")(bench_cmds.calibrate)
    return app


def write_stack(tmp: Path, prompt: int = 40, output: int = 10, users: int = 2, ttft: float = 1000,
                itl: float = 50) -> Path:
    p = tmp / "Pulumi.benchtest.yaml"
    p.write_text(STACK_YAML.format(prompt=prompt, output=output, users=users, ttft=ttft, itl=itl))
    return p


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dist(p50: float, p95: float) -> Distribution:
    return Distribution(samples=100, mean=p50, p50=p50, p95=p95, p99=p95 * 1.1)


def make_run(load: float, output_tokens_per_s: float, ttft_p95: float, itl_p95: float, *, planned: bool = False,
             errors: int = 0, sent: int = 100, slo_ttft: float = 1000.0, slo_itl: float = 25.0,
             good_share: float = 1.0) -> RunMetrics:
    err_rate = errors / sent
    meets = ttft_p95 <= slo_ttft and itl_p95 <= slo_itl and err_rate <= 0.01
    return RunMetrics(
        mode="concurrency", load=load, planned=planned, duration_s=60.0, wall_s=60.0, requests_sent=sent,
        completed=sent - errors, errors=errors, error_rate=err_rate, error_kinds={"http-500": errors} if errors else {},
        ttft_ms=dist(ttft_p95 * 0.6, ttft_p95), itl_ms=dist(itl_p95 * 0.8, itl_p95),
        tpot_ms=dist(itl_p95 * 0.8, itl_p95 * 0.9), e2e_ms=dist(5000, 8000),
        prompt_tokens_mean=1024.0, prompt_tokens_counted_by="server", output_tokens_mean=512.0,
        output_tokens_counted_by="server", output_tokens_total=int(output_tokens_per_s * 60),
        output_tokens_per_s=output_tokens_per_s, total_tokens_per_s=output_tokens_per_s * 3,
        requests_per_s=output_tokens_per_s / 512, achieved_concurrency=load, slo_ttft_p95_ms=slo_ttft,
        slo_itl_p95_ms=slo_itl, good_requests=int((sent - errors) * good_share),
        goodput_requests_per_s=output_tokens_per_s / 512 * good_share,
        goodput_output_tokens_per_s=output_tokens_per_s * good_share, meets_slo=meets)


def make_results(plan: Plan | None, runs: list[RunMetrics], replicas: float | None = None,
                 **kw: Any) -> BenchResults:
    workload = plan.workload if plan is not None and "output_tokens" in plan.workload else {
        "model": "meta-llama/Meta-Llama-3-8B-Instruct", "prompt_tokens": {"mean": 1024, "p95": None},
        "output_tokens": {"mean": 512, "p95": None}}
    return BenchResults(endpoint="http://127.0.0.1:8000", served_model="llama-3-8b-instruct", api="completions",
                        stack="test", started_at="2026-11-29T00:00:00+00:00", seed=0, workload=workload, runs=runs,
                        plan=plan, replicas_under_test=replicas, **kw)
