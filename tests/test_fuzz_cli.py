"""Fuzzed stack files through `llmcap plan`: a plan, or one clear error with exit 2 or 3;
never a traceback. For every plan printed, the invariants hold (memory fits, predicted SLO
met, cost positive). Run size: LLMCAP_FUZZ_EXAMPLES (default 2,000)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sizing.cli import app

EXAMPLES = int(os.environ.get("LLMCAP_FUZZ_EXAMPLES", "2000"))
runner = CliRunner()
COUNTS = {"cases": 0, "plans": 0, "bad_input": 0, "infeasible": 0}

weird_numbers = st.one_of(
    st.integers(min_value=-10**12, max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 2**63, 1e308, float("nan"), float("inf"), "12", "", True, None]),
)
weird_text = st.one_of(st.text(max_size=40), st.sampled_from(["", "😀", "a\x00b", "../../etc/passwd", "Ĳ" * 50]))


def mostly(good: Any, bad: Any, one_in: int = 12) -> Any:
    """`good` most of the time, `bad` about once in `one_in` draws."""
    return st.integers(0, one_in - 1).flatmap(lambda k: bad if k == 0 else good)


models = mostly(st.sampled_from(["meta-llama/Meta-Llama-3-8B-Instruct", "llama-3.1-8b-instruct",
                                  "qwen2.5-7b-instruct", "mistral-7b-instruct-v0.3", "llama-3.1-70b-instruct",
                                  "qwen3-30b-a3b", "gemma-2-9b-it", "phi-4"]),
                 st.sampled_from(["not/a-model", "gpt-5", "", "llama"]))
gpus = mostly(st.lists(st.sampled_from(["L4", "A10G", "L40S", "A100-80GB", "H100-SXM", "H200", "l4"]),
                       min_size=1, max_size=4, unique=True),
              st.lists(st.sampled_from(["TPU", "h100", ""]), max_size=2))
regions = mostly(st.just("us-east-1"), st.sampled_from(["us-west-2", "eu-west-1", "mars-north-1", "", "US-EAST-1"]),
                 one_in=6)


@st.composite
def plausible_workload(draw: Any) -> dict[str, Any]:
    w: dict[str, Any] = {
        "model": draw(models),
        "precision": draw(mostly(st.one_of(st.sampled_from(["fp16", "bf16", "fp8", "int4-awq"]),
                                           st.lists(st.sampled_from(["fp16", "fp8", "int4-awq", "int8"]),
                                                    min_size=1, max_size=3, unique=True)),
                                 st.sampled_from(["fp3", [], ["fp8", "fp8"], 16]))),
        "prompt_tokens": draw(mostly(st.integers(min_value=16, max_value=8192), weird_numbers)),
        "output_tokens": draw(mostly(st.integers(min_value=1, max_value=2048), weird_numbers)),
        "traffic": draw(mostly(st.one_of(
            st.fixed_dictionaries({"concurrent_users": st.integers(min_value=1, max_value=5000)}),
            st.fixed_dictionaries({"peak_requests_per_s": st.floats(min_value=0.1, max_value=200)})),
            st.dictionaries(st.sampled_from(["concurrent_users", "peak_requests_per_s", "tokens_per_s_per_user",
                                             "users"]), weird_numbers, max_size=3))),
        "slo": draw(mostly(
            st.fixed_dictionaries({"ttft_p95_ms": st.floats(min_value=100, max_value=20000),
                                   "itl_p95_ms": st.floats(min_value=5, max_value=300)}),
            st.dictionaries(st.sampled_from(["ttft_p95_ms", "itl_p95_ms", "tpot"]), weird_numbers, max_size=3))),
    }
    if draw(st.integers(0, 5)) == 0:
        w[draw(st.sampled_from(["prefix_cache_hit_rate", "kv_cache_dtype", "max_context_tokens", "engine",
                                "extra_key"]))] = draw(st.one_of(weird_numbers, weird_text))
    if draw(st.integers(0, 9)) == 0:
        w.pop(draw(st.sampled_from(sorted(w))))
    return w


@st.composite
def stack_text(draw: Any) -> str:
    kind = draw(st.integers(0, 29))
    if kind == 0:
        return draw(st.text(max_size=200))  # arbitrary text, often not YAML or not a mapping
    config: dict[str, Any] = {"aws:region": draw(regions), "llmcap:workload": draw(plausible_workload())}
    hw: dict[str, Any] = {}
    if draw(st.booleans()):
        hw["gpus"] = draw(gpus)
    if draw(st.booleans()):
        hw["strategy"] = draw(mostly(st.sampled_from(["auto", "scale-up", "scale-out", "mixed"]),
                                     st.just("sideways")))
    if draw(st.booleans()):
        hw["redundancy"] = draw(mostly(st.integers(min_value=0, max_value=3), weird_numbers))
    if draw(st.booleans()):
        hw["purchase"] = draw(mostly(st.sampled_from(["on-demand", "spot", "mixed"]), st.just("free")))
    if hw:
        config["llmcap:hardware"] = hw
    if kind == 1:
        config["llmcap:" + draw(st.sampled_from(["workloads", "budget", "x"]))] = draw(weird_numbers)
    return yaml.safe_dump({"config": config}, allow_unicode=True)


def _check_invariants(plan: dict[str, Any]) -> None:
    slo = plan["workload"]["slo"]
    assert plan["totals"]["usd_per_hour"] > 0 and math.isfinite(plan["totals"]["usd_per_month"])
    for p in plan["pools"]:
        r = p["per_replica"]
        assert r["ttft_p95_ms"] <= slo["ttft_p95_ms"] + 1e-6
        assert r["itl_p95_ms"] <= slo["itl_p95_ms"] + 1e-6
        assert r["kv_cache_gib_per_gpu"] > 0 and r["max_concurrent_sequences"] >= 1
        assert p["instances_desired"] >= 1 and p["replicas"] >= 1


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(stack_text())
def test_plan_never_tracebacks(tmp_path_factory: Any, text: str) -> None:
    f = Path(tmp_path_factory.mktemp("fz")) / "Pulumi.fuzz.yaml"
    f.write_text(text, encoding="utf-8")
    r = runner.invoke(app, ["plan", str(f), "--format", "json"], catch_exceptions=True)
    COUNTS["cases"] += 1
    assert r.exception is None or isinstance(r.exception, SystemExit), (text, repr(r.exception))
    assert "Traceback" not in r.output, text
    assert r.exit_code in (0, 2, 3), (r.exit_code, text, r.output)
    if r.exit_code == 0:
        COUNTS["plans"] += 1
        _check_invariants(json.loads(r.stdout))
    else:
        COUNTS["bad_input" if r.exit_code == 2 else "infeasible"] += 1
        errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
        assert errors, r.output


def test_fuzz_counts_reported() -> None:
    # runs after the fuzz test in file order; prints the figures for the closing note
    if COUNTS["cases"]:
        print(f"\nfuzz: {COUNTS}")
        assert COUNTS["cases"] >= min(EXAMPLES, 2000) * 0.9
