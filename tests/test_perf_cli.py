"""`llmcap estimate` load options: --engine, --pp, --concurrency N|max, --rate, SLO goodput, --batch."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from sizing.cli import app

runner = CliRunner()
BASE = ["estimate", "--model", "llama-3.1-8b-instruct", "--gpu", "L40S", "--precision", "fp8",
        "--prompt-tokens", "1024", "--output-tokens", "256", "--format", "json"]
KEYS = {"weights_gib", "kv_cache_bytes_per_token", "kv_cache_gib_available", "max_concurrent_sequences",
        "concurrency", "requests_per_s", "output_tokens_per_s", "ttft_ms", "ttft_p95_ms", "itl_ms", "itl_p95_ms",
        "e2e_latency_ms", "bound"}


def _json(args: list[str], code: int = 0) -> dict[str, object]:
    r = runner.invoke(app, args, env={"COLUMNS": "120"})
    assert r.exit_code == code, r.output
    out: dict[str, object] = json.loads(r.stdout)
    return out


def test_closed_loop_keys_and_bound() -> None:
    d = _json(BASE + ["--concurrency", "16", "--engine", "sglang"])
    assert set(d) >= KEYS and d["concurrency"] == 16 and d["engine"] == "sglang"
    assert d["bound"] in ("memory-bandwidth", "compute", "communication", "kv-capacity", "engine-limit")


def test_max_rate_and_goodput() -> None:
    top = _json(BASE + ["--concurrency", "max"])
    rate = _json(BASE + ["--rate", "1.5", "--pp", "2"])
    assert rate["stable"] is True and rate["requests_per_s"] == 1.5
    g = _json(BASE + ["--ttft-p95-ms", "1000", "--itl-p95-ms", "50"])
    assert g["goodput_feasible"] is True
    assert 0 < float(g["goodput_output_tokens_per_s"]) <= float(top["output_tokens_per_s"])  # type: ignore[arg-type]


def test_infeasible_goodput_says_why() -> None:
    d = _json(["estimate", "--model", "meta-llama/Meta-Llama-3-8B-Instruct", "--gpu", "L4", "--precision", "fp16",
               "--prompt-tokens", "1024", "--output-tokens", "512", "--itl-p95-ms", "25", "--format", "json"],
              code=3)  # infeasible exits 3, as plan does; the JSON still comes on stdout
    assert d["goodput_feasible"] is False and d["goodput_output_tokens_per_s"] == 0.0
    assert "decode-step floor" in str(d["goodput_reason"])


def test_bad_load_options_are_one_line_errors() -> None:
    for extra in (["--concurrency", "lots"], ["--concurrency", "4", "--rate", "1"], ["--engine", "tgi-x"]):
        r = runner.invoke(app, BASE + extra)
        assert r.exit_code == 2 and "Traceback" not in r.output


def test_batch_answers_each_line_in_order(tmp_path: Path) -> None:
    q = tmp_path / "q.jsonl"
    lines = [
        {"model": "llama-3.1-8b-instruct", "gpu": "L4", "tp": 1, "pp": 1, "precision": "fp8",
         "kv_cache_dtype": "auto", "engine": "vllm", "prompt_tokens": 512, "output_tokens": 128, "concurrency": "max"},
        {"model": "no-such-model", "gpu": "L4", "prompt_tokens": 1, "output_tokens": 1, "rate": 1},
        {"model": "llama-3.1-8b-instruct", "gpu": "A100-80GB", "tp": 2, "precision": "bf16", "prompt_tokens": 512,
         "output_tokens": 128, "rate": 2.0},
    ]
    q.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    r = runner.invoke(app, ["estimate", "--batch", str(q)])
    assert r.exit_code == 0, r.output
    out = [json.loads(x) for x in r.output.splitlines() if x.strip()]
    assert len(out) == 3 and "error" in out[1] and "error" not in out[0] and "error" not in out[2]
    assert out[0]["gpu"] == "L4" and out[2]["tp"] == 2 and set(out[2]) >= KEYS
