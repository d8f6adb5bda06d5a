"""End to end through the CLI: `llmcap preflight` against a moto server (via LLMCAP_AWS_ENDPOINT_URL),
`llmcap catalog refresh` and `llmcap plan --preflight` without credentials (one line, exit 2 / warning)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sizing.adapters.aws import Check, PreflightReport
from sizing.catalog.lookup import Catalog
from sizing.cli import aws_cmds
from tests.aws_support import moto_url, set_dummy_aws_env

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "stacks" / "Pulumi.dev.yaml"


def _app() -> typer.Typer:
    """The same registrations sizing/cli/__init__.py makes for these commands."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command("preflight")(aws_cmds.preflight)
    app.add_typer(aws_cmds.catalog_app, name="catalog")
    return app


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner(env={"COLUMNS": "160"})


def _no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    set_dummy_aws_env(monkeypatch, tmp_path, None)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")


def _planned_type() -> str:
    from sizing.planning.planner import plan_stack
    from sizing.stack import load_stack

    return plan_stack(load_stack(DEV), Catalog()).pools[0].instance_type


def test_refresh_without_credentials_is_one_line_exit_2(runner: CliRunner, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    _no_credentials(monkeypatch, tmp_path)
    r = runner.invoke(_app(), ["catalog", "refresh", "--region", "us-east-1", "--out", str(tmp_path / "c")])
    assert r.exit_code == 2, r.output
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert r.stderr.startswith("error: no AWS credentials found") and "Traceback" not in r.output
    assert not (tmp_path / "c").exists()


def test_preflight_without_credentials_is_one_line_exit_2(runner: CliRunner, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    _no_credentials(monkeypatch, tmp_path)
    r = runner.invoke(_app(), ["preflight", str(DEV)])
    assert r.exit_code == 2, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and "no AWS credentials found" in r.stderr
    assert "Traceback" not in r.output


def test_preflight_json_in_a_region_without_the_planned_type(runner: CliRunner, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    set_dummy_aws_env(monkeypatch, tmp_path, moto_url())
    # moto answers ListServiceQuotas with a 500 (not implemented): botocore's standard retries would sleep
    # about 5 s before the same "unknown" quota, so this test's clients try once
    from botocore.config import Config

    import sizing.adapters.aws

    monkeypatch.setattr(sizing.adapters.aws, "Config",
                        lambda **kw: Config(**{**kw, "retries": {"max_attempts": 1, "mode": "standard"}}))
    cat = Catalog()
    itype = _planned_type()
    offering = cat.regions_offering(itype)
    lacking = sorted(set(cat.regions) - set(offering))
    assert lacking, f"moto's data offers {itype} everywhere; pick another case"
    r = runner.invoke(_app(), ["preflight", str(DEV), "--region", lacking[0], "--format", "json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["ok"] is False
    (off,) = [c for c in doc["checks"] if c["check"] == "offered"]
    assert set(off) >= {"check", "instance_type", "offered_azs", "status", "detail"}
    assert (off["instance_type"], off["status"], off["offered_azs"]) == (itype, "fail", [])
    assert "not offered" in off["detail"] and offering[0] in off["detail"]
    # moto has no EC2 quotas: the quota is reported unknown, never passed
    assert [c["status"] for c in doc["checks"] if c["check"] == "quota"] == ["unknown"]
    assert "preflight offered fail" in r.stderr


def test_preflight_table_names_quota_code_and_increase_command(capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    fix = ("aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-417A185B "
           "--desired-value 128 --region us-east-1")
    report = PreflightReport("us-east-1", [
        Check("offered", "p5.4xlarge", ["use1-az4", "use1-az6"], "pass", "offered in 2 AZ(s)"),
        Check("quota", "p5.4xlarge", [], "fail", "Running On-Demand P instances (L-417A185B): needs 128 vCPUs",
              quota_name="Running On-Demand P instances", quota_code="L-417A185B", quota_vcpus=0.0,
              required_vcpus=128, fix=fix)])
    aws_cmds._print_report(report)
    out = capsys.readouterr().out
    assert "Running On-Demand P instances (L-417A185B)" in out and "128 / 0" in out
    assert fix in out and "use1-az4, use1-az6" in out


def test_plan_preflight_is_a_warning_without_credentials(runner: CliRunner, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    from sizing.cli import app

    _no_credentials(monkeypatch, tmp_path)
    r = runner.invoke(app, ["plan", str(DEV), "--preflight", "--format", "json"])
    assert r.exit_code == 0, r.output
    warnings = json.loads(r.stdout)["warnings"]
    assert any(w.startswith("preflight skipped: no AWS credentials found") for w in warnings)
