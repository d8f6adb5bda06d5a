"""Issue 27: `redundancy: 200` passed validate and plan with a warning. More spare replicas than
max(REDUNDANCY_ALWAYS_ALLOWED, the demand's replicas) (N+2 or 2N, sizing.spec) is refused with one line naming
the field and the fix: by validate against the requests in flight (an upper bound on the demand's replicas),
by plan against the sized demand."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sizing.cli import app
from sizing.spec import REDUNDANCY_ALWAYS_ALLOWED

DEV = Path(__file__).resolve().parents[1] / "stacks" / "Pulumi.dev.yaml"


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.output


def _dev(tmp_path: Path, redundancy: int) -> str:
    f = tmp_path / "Pulumi.dev.yaml"
    f.write_text(DEV.read_text().replace("    redundancy: 1\n", f"    redundancy: {redundancy}\n"))
    return str(f)


def test_validate_refuses_200_spares_for_100_users(tmp_path: Path) -> None:
    code, out = _run("validate", _dev(tmp_path, 200))
    assert code == 2, out
    line = next(x for x in out.splitlines() if "hardware.redundancy" in x)
    assert "200 spare replicas" in line and "at most 100" in line and "workload.traffic" in line
    assert "Traceback" not in out


def test_plan_refuses_more_spares_than_the_demand_replicas() -> None:
    # 2 users fit one dev replica: 3 spares are N+3
    code, out = _run("plan", str(DEV), "--set", "workload.traffic.concurrent_users=2", "--set",
                     "hardware.redundancy=3")
    assert code == 2, out
    assert "llmcap:hardware.redundancy: 3 spare replicas is more than the 2 allowed" in out
    import re

    n = re.search(r"N = (\d+) replicas for the demand", out)
    assert n is not None and int(n.group(1)) <= 2, out  # max(2, N) allowed: 3 spares are above it


def test_n_plus_two_and_2n_are_allowed(tmp_path: Path) -> None:
    code, out = _run("plan", str(DEV), "--set", "workload.traffic.concurrent_users=2", "--set",
                     f"hardware.redundancy={REDUNDANCY_ALWAYS_ALLOWED}")
    assert code == 0, out
    code, out = _run("validate", _dev(tmp_path, 100))  # 2N for 100 users: allowed, warned
    assert code == 0, out


def test_the_bound_is_in_the_field_description() -> None:
    from sizing.spec import HardwareSpec

    desc = HardwareSpec.model_fields["redundancy"].description or ""
    assert f"at most the larger of {REDUNDANCY_ALWAYS_ALLOWED} and the replicas the demand needs" in desc


def test_no_latency_bound_means_no_in_flight_bound(tmp_path: Path) -> None:
    # a rate with a TTFT target only: the time in flight is unbounded, so validate cannot bound the spares
    # (the fuzz found `math.ceil(inf)` here); plan still judges them against the sized demand
    f = tmp_path / "Pulumi.t.yaml"
    f.write_text("config:\n  aws:region: us-east-1\n  llmcap:workload:\n    model: llama-3.1-8b-instruct\n"
                 "    prompt_tokens: 100\n    output_tokens: 10\n    traffic: {peak_requests_per_s: 1}\n"
                 "    slo: {ttft: {p95: 1000}}\n  llmcap:hardware:\n    redundancy: 50\n")
    code, out = _run("validate", str(f))
    assert code == 0 and "Traceback" not in out, out
