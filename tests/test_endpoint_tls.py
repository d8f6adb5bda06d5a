"""TLS on the endpoint by default (issue 32): a stack without `tls_certificate_arn` is refused by the
deployability check (render exit 2, `pulumi preview` one line) unless it opts into plain HTTP with
`llmcap:deployment.allow_plain_http_endpoint: true`; with a certificate the NLB listens on 443 only."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from infra.fit import FitContext, check_deployable
from infra.fit_rules_platform import endpoint_tls
from sizing.deployment import DeploymentOptions
from tests import pulumi_harness as h
from tests.isolation import no_local_data
from tests.plan_factory import make_plan

ROOT = Path(__file__).resolve().parents[1]
ARN = "arn:aws:acm:us-east-1:111122223333:certificate/abc-123"


def ctx(**deployment: object) -> FitContext:
    from sizing.stack import stack_from_config

    stack = stack_from_config("t", {"llmcap:workload": {"model": "meta-llama/Meta-Llama-3-8B-Instruct",
                                                        "prompt_tokens": 1024, "output_tokens": 512,
                                                        "traffic": {"concurrent_users": 10}},
                                    "llmcap:deployment": deployment}, "test")
    return FitContext(stack=stack, plan=make_plan(stack="t"), catalog=h.catalog())


def test_plain_http_is_refused_without_the_opt_out() -> None:
    problems = list(endpoint_tls(ctx()))
    assert [p.line() for p in problems] == [
        "[endpoint-tls] llmcap:deployment: the endpoint would serve plain HTTP, so the API key crosses the VPC in "
        "clear text; set tls_certificate_arn to an ACM certificate (internal or public, docs/security.md \"TLS on "
        "the endpoint\"), or allow_plain_http_endpoint: true to accept plain HTTP"]


def test_a_certificate_or_the_opt_out_passes() -> None:
    assert list(endpoint_tls(ctx(tls_certificate_arn=ARN))) == []
    assert list(endpoint_tls(ctx(allow_plain_http_endpoint=True))) == []


def test_the_opt_out_contradicts_a_certificate() -> None:
    with pytest.raises(ValueError, match="allow_plain_http_endpoint"):
        DeploymentOptions(allow_plain_http_endpoint=True, tls_certificate_arn=ARN)


def test_render_refuses_a_stack_without_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sizing.cli import app

    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    monkeypatch.chdir(tmp_path)
    no_local_data(monkeypatch, tmp_path)
    f = tmp_path / "stacks" / "Pulumi.dev.yaml"
    doc = yaml.safe_load(f.read_text())
    doc["config"]["llmcap:deployment"].pop("allow_plain_http_endpoint")
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = CliRunner().invoke(app, ["render", "stacks/Pulumi.dev.yaml", "--out", "out", "--fresh"],
                           env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 2, r.output
    assert "[endpoint-tls] llmcap:deployment: the endpoint would serve plain HTTP" in r.output
    assert not (tmp_path / "out").exists()


def test_every_bundled_stack_says_how_its_endpoint_is_served() -> None:
    for name in h.BUNDLED_STACKS:
        from sizing.stack import load_stack

        d = load_stack(ROOT / "stacks" / f"Pulumi.{name}.yaml").deployment
        assert d.tls_certificate_arn or d.allow_plain_http_endpoint, name
        report = check_deployable(FitContext(stack=load_stack(ROOT / "stacks" / f"Pulumi.{name}.yaml"),
                                             plan=make_plan(stack=name), catalog=h.catalog()))
        assert not [p for p in report.problems if p.rule == "endpoint-tls"], name


def test_the_security_doc_quotes_the_certificate_costs_of_the_data_file() -> None:
    ways = yaml.safe_load((ROOT / "infra" / "data" / "tls.yaml").read_text())["ways"]
    doc = (ROOT / "docs" / "security.md").read_text()
    for key, row in ways.items():
        cost = f"${row['usd_per_month']}" if row["usd_per_month"] == 0 else f"${row['usd_per_month']:,}/month"
        assert row["source"] and cost in doc, key
