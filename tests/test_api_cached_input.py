"""Issue 27: where the workload reuses prefixes, the hosted-API bill prices the cached share of input tokens
at the API's cache-read price when it has one (sizing/data/api_prices.csv cache_read_usd_per_mtok, or
genai-prices' cache_read_mtok), with the same share the self-hosted plan is sized with, and says so in the plan
table, the JSON, the compare/sweep line and plot label, and the diff's API line; an API without a cache-read
price bills every input token at its input price, said so too."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.analysis.diff import side_from_plan
from sizing.analysis.sweep import cheapest_api
from sizing.catalog.lookup import load_catalog
from sizing.cli import app
from sizing.plan import ApiComparison
from sizing.planning.planner import plan_stack
from sizing.stack import load_stack

DEV = Path(__file__).resolve().parents[1] / "stacks" / "Pulumi.dev.yaml"


def _stack(tmp_path: Path, share: float) -> Path:
    # gpt-oss-20b: Fireworks and Groq have cache-read prices, AWS Bedrock has none (api_prices.csv, genai-prices)
    text = (DEV.read_text().replace("model: meta-llama/Meta-Llama-3-8B-Instruct", "model: openai/gpt-oss-20b")
            .replace("precision: [fp16, fp8, int4-awq]", "precision: [bf16, fp8]")
            .replace("prefix_cache_hit_rate: 0.0", f"prefix_cache_hit_rate: {share}"))
    text = "\n".join(x for x in text.splitlines() if "int4-awq:" not in x and "checkpoints:" not in x) + "\n"
    f = tmp_path / "Pulumi.oss.yaml"
    f.write_text(text)
    return f


def _rows(tmp_path: Path, share: float) -> dict[str, ApiComparison]:
    p = plan_stack(load_stack(_stack(tmp_path, share)), load_catalog(), goodput_scale=None)
    return {a.provider: a for a in p.api_comparison}


def test_the_cached_share_is_billed_at_the_cache_read_price(tmp_path: Path) -> None:
    rows = _rows(tmp_path, 0.6)
    fw, bedrock = rows["Fireworks"], rows["AWS Bedrock"]
    assert fw.usd_per_million_cached_input_tokens is not None and fw.cached_input_share == pytest.approx(0.6)
    per_in = 0.4 * fw.usd_per_million_input_tokens + 0.6 * fw.usd_per_million_cached_input_tokens
    want = fw.input_mtok_per_month * per_in + fw.output_mtok_per_month * fw.usd_per_million_output_tokens
    assert fw.usd_per_month_same_traffic == pytest.approx(want, abs=0.01)
    assert "60% of input cached at $" in fw.cached_note()
    # without a cache-read price every input token is billed at the input price, and that is said
    assert bedrock.usd_per_million_cached_input_tokens is None and bedrock.cached_input_share == 0
    assert bedrock.usd_per_month_same_traffic == pytest.approx(
        bedrock.input_mtok_per_month * bedrock.usd_per_million_input_tokens
        + bedrock.output_mtok_per_month * bedrock.usd_per_million_output_tokens, abs=0.01)
    assert "no cache-read price" in bedrock.cached_note()


def test_no_reuse_no_discount(tmp_path: Path) -> None:
    fw = _rows(tmp_path, 0.0)["Fireworks"]
    assert fw.cached_input_share == 0 and fw.cached_note() == ""
    assert fw.usd_per_month_same_traffic == pytest.approx(
        fw.input_mtok_per_month * fw.usd_per_million_input_tokens
        + fw.output_mtok_per_month * fw.usd_per_million_output_tokens, abs=0.01)
    assert _rows(tmp_path, 0.6)["Fireworks"].usd_per_month_same_traffic < fw.usd_per_month_same_traffic


def test_plan_table_json_sweep_and_diff_say_so(tmp_path: Path) -> None:
    f = _stack(tmp_path, 0.6)
    r = CliRunner().invoke(app, ["plan", str(f)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())  # lines fold at the terminal width
    assert "(cached $0.035)" in out
    assert "Fireworks cached input at $0.035/1M" in out
    assert "no cache-read price at AWS Bedrock: all input at the input price" in out
    r = CliRunner().invoke(app, ["plan", str(f), "--format", "json"])
    assert '"usd_per_million_cached_input_tokens": 0.035' in r.output and '"cached_input_share": 0.6' in r.output
    stack = load_stack(f)
    api = cheapest_api(load_catalog(), stack)
    assert api is not None and api.cached_input_share == pytest.approx(0.6)
    assert api.usd_per_million_cached_input_tokens is not None
    ratio = api.prompt_tokens_per_output_token
    per_in = 0.4 * api.usd_per_million_input_tokens + 0.6 * api.usd_per_million_cached_input_tokens
    assert api.usd_per_million_output_tokens_with_input == pytest.approx(api.usd_per_million_output_tokens
                                                                         + ratio * per_in, abs=1e-4)
    side = side_from_plan(plan_stack(stack, load_catalog(), goodput_scale=None), "HEAD")
    assert side.cheapest_api is not None and "cached at $" in side.cheapest_api.cached


def test_a_trace_bills_the_share_its_replayed_fleet_served(tmp_path: Path) -> None:
    # a generic trace whose requests share prefix blocks: the self-hosted fleet's caches serve some share of the
    # prompt tokens in the replay; the API bills that same share at its cache-read price
    rows = ["arrival_s,prompt_tokens,output_tokens,prefix_ids"]
    for i in range(200):
        rows.append(f"{i * 0.25:.2f},1024,64,1 2 {100 + i}")  # two shared blocks of 512 tokens, one own
    (tmp_path / "trace.csv").write_text("\n".join(rows) + "\n")
    f = tmp_path / "Pulumi.t.yaml"
    f.write_text("config:\n  aws:region: us-east-1\n  llmcap:workload:\n    model: openai/gpt-oss-20b\n"
                 "    precision: [bf16]\n    slo: {ttft_p95_ms: 3000, itl_p95_ms: 60}\n"
                 "    trace: {path: trace.csv, prefix_block_tokens: 512}\n"
                 "  llmcap:hardware:\n    gpus: [L40S]\n    redundancy: 0\n")
    p = plan_stack(load_stack(f), load_catalog(), goodput_scale=None)
    assert p.trace is not None and p.trace.prefix_hit_share_planned > 0
    fw = next(a for a in p.api_comparison if a.provider == "Fireworks")
    assert fw.prefix_share == pytest.approx(p.trace.prefix_hit_share_planned, abs=1e-4)
    assert fw.cached_input_share == pytest.approx(p.trace.prefix_hit_share_planned, abs=1e-4)
