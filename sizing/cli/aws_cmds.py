"""`llmcap preflight` and `llmcap catalog refresh`: the commands that talk to AWS.

sizing.adapters.aws (and so boto3, the `aws` extra) is imported inside the commands, never at import time;
each command first checks that boto3 is installed (sizing.cli.extras).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from sizing.catalog.lookup import load_catalog
from sizing.cli.common import TableOrJson, console, emit_json, guarded
from sizing.cli.extras import require
from sizing.errors import CheckFailedError

if TYPE_CHECKING:
    from sizing.adapters.aws import PreflightReport

catalog_app = typer.Typer(help="Catalog maintenance: refresh instance specs, prices and offerings from AWS.",
                          no_args_is_help=True)

CatalogOpt = typer.Option(None, "--catalog", help="catalog directory (default: bundled, or the user cache)")


@guarded
def preflight(
    stack_file: Path = typer.Argument(..., help="stacks/Pulumi.<env>.yaml"),
    region: str | None = typer.Option(None, "--region", help="region to check (default: the stack's aws:region)"),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    catalog: Path | None = CatalogOpt,
) -> None:
    """Check the plan against live AWS: AZs offering each instance type and vCPU quotas at maximum scale.

    Exit 1 when a check fails; exit 2 on missing credentials or denied access."""
    require("llmcap preflight", "boto3", "botocore")  # before planning
    from sizing.adapters.aws import AwsClients, aws_errors, run_preflight
    from sizing.planning.planner import plan_for

    plan = plan_for(stack_file, catalog=catalog)
    cat = load_catalog(catalog)
    if region:
        cat.check_region(region)  # a typo gets "did you mean", not a connection error
    with aws_errors():
        report = run_preflight(plan, region or plan.region, AwsClients.from_env(), cat)
    if fmt == TableOrJson.json:
        emit_json(report.to_json())
    else:
        _print_report(report)
    if not report.ok:
        failed = [c for c in report.checks if c.status not in ("pass", "info")]
        raise CheckFailedError(f"preflight: {len(failed)} check(s) did not pass",
                               [f"preflight {c.check} {c.status}: {c.detail}" for c in failed])


def _print_report(report: PreflightReport) -> None:
    from rich.table import Table

    t = Table(title=f"Preflight in {report.region}")
    for col in ("check", "instance type", "AZs / quota", "vCPUs needed / quota", "status"):
        t.add_column(col)
    for c in report.checks:
        if c.check == "offered":
            where = ", ".join(c.offered_azs) or "not offered"
            t.add_row(c.check, c.instance_type, where, "", c.status)
        elif c.check == "capacity":
            t.add_row(c.check, c.instance_type, ", ".join(c.offered_azs) or "-", "", c.status)
        else:
            quota = f"{c.quota_name or '-'} ({c.quota_code or '?'})"
            have = f"{c.quota_vcpus:g}" if c.quota_vcpus is not None else "?"
            t.add_row(c.check, c.instance_type, quota, f"{c.required_vcpus} / {have}", c.status)
    out = console()
    out.print(t)
    for c in report.checks:
        if c.status != "pass":
            out.print(f"{c.status}: {c.detail}", soft_wrap=True)
            if c.fix:
                out.print(f"  request an increase: {c.fix}", soft_wrap=True)


@catalog_app.command("refresh")
@guarded
def catalog_refresh(
    region: list[str] | None = typer.Option(None, "--region", help="region to refresh (repeatable; default: "
                                            "the AWS profile's region, else us-east-1)"),
    out: Path | None = typer.Option(None, "--out", help="output directory (default: the user cache, "
                                     "$XDG_CACHE_HOME/llmcap/catalog, i.e. ~/.cache/llmcap/catalog)"),
    catalog: Path | None = CatalogOpt,
    allow_shrink: bool = typer.Option(False, "--allow-shrink", help="accept an answer with far fewer instance "
                                      "types, offerings or prices for a region than the cache holds (or none)"),
    savings_plans: bool = typer.Option(False, "--savings-plans", help="also fetch 1- and 3-year Compute Savings "
                                       "Plan rates (needs savingsplans:DescribeSavingsPlansOfferingRates)"),
    capacity_block: list[str] | None = typer.Option(None, "--capacity-block", help="instance type whose Capacity "
                                                    "Block rate to read (repeatable; DescribeCapacityBlockOfferings, "
                                                    "cheapest 1-instance 24-hour block)"),
    platform: bool = typer.Option(False, "--platform", help="also fetch the platform's unit prices in each region "
                                  "(EKS control plane, NAT gateway, public IPv4, EBS gp3, S3, CloudWatch Logs) and "
                                  "the system nodes' CPU instance prices from the AWS Price List"),
) -> None:
    """Refresh instances.csv, prices.csv, offerings.csv and spot_prices.csv from live AWS APIs.

    Spot prices: per AZ, the time-weighted median of the last 7 days of DescribeSpotPriceHistory.
    The cache is replaced as a whole generation in one rename; on any error it is left as it was."""
    require("llmcap catalog refresh", "boto3", "botocore")
    from sizing.adapters.aws import AwsClients, aws_errors, default_region, refresh_catalog

    cat = load_catalog(catalog)
    with aws_errors():
        regions = list(dict.fromkeys(region or [default_region()]))
        res = refresh_catalog(regions, out, AwsClients.from_env(), cat, allow_shrink=allow_shrink,
                              savings_plans=savings_plans, capacity_blocks=tuple(capacity_block or ()),
                              platform=platform)
    typer.echo(f"wrote {res.out_dir}: {res.instances} GPU instance types, {res.prices} prices, "
               f"{res.offerings} AZ offerings, {res.spot_azs} per-AZ spot medians (7 days) for "
               f"{', '.join(res.regions)}")
    for s in res.skipped:
        typer.echo(f"skipped {s}")
    for u in res.unpriced:
        typer.echo(f"no on-demand price found for {u}")
