"""Helpers for the diff tests: the CLI with `diff` registered, and plan pairs priced from the
catalog (hand-built with tests/plan_factory so goldens do not move when the perf model does)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from sizing.catalog.lookup import load_catalog
from sizing.cost.money import HOURS_PER_MONTH, platform_lines
from sizing.plan import ApiComparison, CostLine, Plan, Totals
from tests.plan_factory import make_plan, make_pool

REGION = "us-east-1"
LLAMA_8B = "meta-llama/Meta-Llama-3-8B-Instruct"
LLAMA_70B = "meta-llama/Meta-Llama-3-70B-Instruct"
API_MODEL = {LLAMA_8B: "Llama-3.1-8B-Instruct", LLAMA_70B: "Llama-3.1-70B-Instruct"}


def cli_app() -> typer.Typer:
    """The real `llmcap` app, with `diff` registered if sizing/cli/__init__.py does not do it yet."""
    from sizing.cli import app, diff_cmd

    if not any(c.name == "diff" for c in app.registered_commands):
        app.command("diff")(diff_cmd.diff)
    return app


DIFF_ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def init_repo(r: Path) -> None:
    """An empty git repository at `r` with a test identity and unsigned commits."""
    git(r, "init", "-q")
    git(r, "config", "user.name", "llmcap test")
    git(r, "config", "user.email", "llmcap-test@example.invalid")
    git(r, "config", "commit.gpgsign", "false")


def run_diff(repo: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    """`llmcap diff ARGS` run in `repo` with the bundled catalog; (exit code, output)."""
    monkeypatch.chdir(repo)
    monkeypatch.delenv("LLMCAP_CATALOG_DIR", raising=False)
    r = CliRunner().invoke(cli_app(), ["diff", *args], env=DIFF_ENV)
    return r.exit_code, r.output


def priced_pool(instance_type: str, gpu: str, gpus_per_instance: int, tp: int, instances: int,
                model: str = LLAMA_8B, precision: str = "fp8", purchase: str = "on-demand") -> Any:
    price = load_catalog().price(instance_type, REGION, purchase)
    if price is None:
        raise LookupError(f"no catalog price for {instance_type} {purchase} in {REGION}")
    per_inst = max(gpus_per_instance // tp, 1)
    return make_pool(name=instance_type.replace(".", "-"), instance_type=instance_type, gpu=gpu,
                     gpus_per_instance=gpus_per_instance, tp=tp, replicas=instances * per_inst,
                     replicas_per_instance=per_inst, instances_min=instances, instances_desired=instances,
                     instances_max=instances * 2, precision=precision, purchase=purchase,
                     usd_per_instance_hour=price.usd_per_hour, model=model)


def plan_of(pools: list[Any], users: int, model: str = LLAMA_8B, stack: str = "dev", ttft_ms: float = 1000,
            itl_ms: float = 25, tokens_per_s_per_user: float = 30) -> Plan:
    """A Plan whose money is all catalog lookups: GPU lines from the pools, platform lines from
    sizing.cost.money.platform_lines, hosted-API bills from the catalog's API prices."""
    cat = load_catalog()
    out_tps = users * tokens_per_s_per_user
    gpu_h = sum(p.usd_per_hour for p in pools)
    nodes = sum(p.instances_desired for p in pools)
    gpu_lines = [CostLine(name=f"GPU instances ({p.purchase}, {p.instance_type})", quantity=p.instances_desired,
                          unit="instances", usd_per_month=round(p.usd_per_hour * HOURS_PER_MONTH, 2),
                          source="prices.csv") for p in pools]
    plat = platform_lines(cat, REGION, weights_gib=15.0 if model == LLAMA_8B else 131.0,
                          root_volume_gib_total=200.0 * nodes, system_instance_type="m6i.xlarge",
                          system_nodes=2, nat_gateways=2)
    plat_month = sum(x.usd_per_month or 0.0 for x in plat)
    month = gpu_h * HOURS_PER_MONTH
    lo = sum(p.usd_per_instance_hour * p.instances_min for p in pools) * HOURS_PER_MONTH
    hi = sum(p.usd_per_instance_hour * p.instances_max for p in pools) * HOURS_PER_MONTH
    mtok = out_tps * HOURS_PER_MONTH * 3600 / 1e6
    apis = []
    for a in cat.api_prices:
        if a.model == API_MODEL[model] and "aggregator" not in a.provider.lower():
            bill = round(mtok * 2 * a.input_usd_per_mtok + mtok * a.output_usd_per_mtok, 2)
            apis.append(ApiComparison(provider=a.provider, model=a.provider_model_id, exact_model=False,
                                      usd_per_million_input_tokens=a.input_usd_per_mtok,
                                      usd_per_million_output_tokens=a.output_usd_per_mtok,
                                      usd_per_month_same_traffic=bill,
                                      ratio_to_self_hosted=round(bill / (month + plat_month), 4),
                                      break_even_output_tokens_per_month=None, source=a.source))
    capacity = sum(p.per_replica.goodput_output_tokens_per_s * p.replicas for p in pools)
    totals = Totals(gpus=sum(p.instances_desired * p.gpus_per_instance for p in pools), instances=nodes,
                    usd_per_hour=gpu_h, usd_per_month=month, usd_per_month_min=lo, usd_per_month_max=hi,
                    platform_usd_per_month=plat_month, all_in_usd_per_month=month + plat_month,
                    usd_per_million_output_tokens=round(gpu_h / (out_tps * 3600) * 1e6, 4),
                    usd_per_million_output_tokens_at_capacity=round(gpu_h / (capacity * 3600) * 1e6, 4),
                    all_in_usd_per_million_output_tokens=round((month + plat_month) / mtok, 4),
                    utilization=round(out_tps / capacity, 4), demand_output_tokens_per_s=out_tps,
                    capacity_output_tokens_per_s=capacity)
    workload = {"model": model, "traffic": {"concurrent_users": users},
                "slo": {"ttft_p95_ms": ttft_ms, "itl_p95_ms": itl_ms}}
    return make_plan(pools=pools, stack=stack, workload=workload, totals=totals, cost_lines=gpu_lines + plat,
                     api_comparison=sorted(apis, key=lambda a: a.usd_per_month_same_traffic))


def l4_plan(users: int = 100, stack: str = "dev") -> Plan:
    return plan_of([priced_pool("g6.12xlarge", "L4", 4, 1, max(users // 50, 1))], users, stack=stack)
