"""The compatibility table (infra/data/versions.yaml `compatibility`, issue 14 item 10): every
Kubernetes-side pin has a row for exactly the pinned version, with its source, and the pinned cluster
minor is inside every row (the deployability check's version-unsupported rule refuses the rest)."""

from __future__ import annotations

import re

import pytest

from infra.config import settings
from infra.config.platform import load_platform
from infra.fit.check import FitContext
from infra.fit.platform_rules import version_unsupported
from tests import pulumi_harness as h
from tests.plan_factory import make_plan
from tests.test_fit_platform import stack

# the charts and images the Kubernetes side installs, and the version the table must carry for each
PINNED = {
    "keda": settings.chart("keda").version,
    "kube_prometheus_stack": settings.chart("kube_prometheus_stack").version,
    "nvidia_device_plugin": settings.chart("nvidia_device_plugin").version,
    "leaderworkerset": settings.chart("leaderworkerset").version,
    "aws_load_balancer_controller": settings.chart_app_version("aws_load_balancer_controller"),
    "cluster_autoscaler": settings.chart_app_version("cluster_autoscaler"),
    "router": settings.image("router").tag,
    "karpenter": settings.chart("karpenter").version,
    "aws_efa_device_plugin": settings.chart("aws_efa_device_plugin").version,
}


def _minor(v: str) -> tuple[int, int]:
    m = re.match(r"^(\d+)\.(\d+)$", v)
    assert m, v
    return int(m.group(1)), int(m.group(2))


def test_every_pin_has_a_sourced_row_for_its_version() -> None:
    table = settings.compatibility()
    assert set(table) == set(PINNED)
    for key, version in PINNED.items():
        row = table[key]
        assert row.version == version, f"{key}: pinned {version}, table row is for {row.version}"
        assert row.source and row.rule and row.as_of, key
        if row.kubernetes_max is not None:
            assert _minor(row.kubernetes_min) <= _minor(row.kubernetes_max), key


def test_the_pinned_cluster_minor_is_supported_by_every_component() -> None:
    k8s = _minor(load_platform().kubernetes_version)
    for key, row in settings.compatibility().items():
        assert _minor(row.kubernetes_min) <= k8s, f"{key} needs >= {row.kubernetes_min}"
        high = row.kubernetes_max
        assert high is None or k8s <= _minor(high), f"{key} supports <= {high}"


def test_cluster_autoscaler_minor_matches_the_cluster_minor() -> None:
    ca = settings.chart_app_version("cluster_autoscaler")
    assert ".".join(ca.split(".")[:2]) == load_platform().kubernetes_version


def test_the_pinned_router_is_a_release_not_a_dev_build() -> None:
    tag = settings.image("router").tag
    assert re.fullmatch(r"v?\d+\.\d+\.\d+", tag), tag


def test_bundled_stacks_pass_and_an_older_cluster_is_refused_per_component() -> None:
    for name in h.BUNDLED_STACKS:
        result = h.bundled(name)
        ctx = FitContext(stack=result.stack, plan=result.plan, catalog=h.catalog())
        assert list(version_unsupported(ctx)) == [], name
    ctx = FitContext(stack=stack({"kubernetes_version": "1.31"}), plan=make_plan(stack="t"), catalog=h.catalog())
    problems = {p.subject: p for p in version_unsupported(ctx)}
    assert {"keda", "cluster_autoscaler"} <= set(problems), sorted(problems)
    assert "1.31" in problems["keda"].message and problems["keda"].source.startswith("https://keda.sh")
    assert all(p.rule == "version-unsupported" and "\n" not in p.message for p in problems.values())


@pytest.mark.parametrize("minor", ["1.36"])
def test_a_newer_cluster_than_a_bounded_row_is_refused(minor: str) -> None:
    ctx = FitContext(stack=stack({"kubernetes_version": minor}), plan=make_plan(stack="t"), catalog=h.catalog())
    assert {"keda", "cluster_autoscaler"} <= {p.subject for p in version_unsupported(ctx)}


def test_render_refuses_an_unsupported_cluster_minor_with_one_line_per_component(tmp_path) -> None:
    from typer.testing import CliRunner

    from sizing.cli import app

    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["render", str(h.ROOT / "stacks" / "Pulumi.dev.yaml"), "--out", str(out),
                                 "--set", 'deployment.kubernetes_version="1.31"'])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error: [version-unsupported]")]
    assert any(" keda:" in ln for ln in lines) and any("cluster_autoscaler" in ln and "only 1.35" in ln
                                                          for ln in lines), r.output
    assert "Traceback" not in r.output and not out.exists()
