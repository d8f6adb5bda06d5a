"""`EstimateQuery` (sizing/perf/query.py): one model validates the `llmcap estimate` flags and the lines
of `--batch FILE.jsonl`, once, with one-line errors naming the field: `--tp: ...` for a flag,
`line N: tp: ...` for a JSONL key; a flag query and the same JSONL line give the same figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.cli import app
from sizing.errors import SpecError
from sizing.perf.query import EstimateQuery

runner = CliRunner()
GOOD = {"model": "llama-3.1-8b-instruct", "gpu": "L4", "precision": "fp8", "prompt_tokens": 512, "output_tokens": 128}


def _batch(tmp_path: Path, lines: list[str]) -> list[dict[str, object]]:
    q = tmp_path / "q.jsonl"
    q.write_text("\n".join(lines) + "\n")
    r = runner.invoke(app, ["estimate", "--batch", str(q)])
    assert r.exit_code == 0, r.output
    return [json.loads(x) for x in r.stdout.splitlines() if x.strip()]


@pytest.mark.parametrize("extra,line_error", [
    ({"tpp": 2}, "line 2: tpp: unknown key; use one of model, gpu, tp, pp,"),
    ({"tp": "x"}, "line 2: tp: must be a whole number (got 'x')"),
    ({"tp": 0}, "line 2: tp: must be at least 1 (got 0)"),
    ({"tp": True}, "line 2: tp: must be a number (got True)"),
    ({"tp": 2.5}, "line 2: tp: must be a whole number (got 2.5)"),
    ({"model": 5}, "line 2: model: must be a string (got 5)"),
    ({"tp": 3}, "line 2: tp: 32 attention heads of meta-llama/Llama-3.1-8B-Instruct do not split over 3 GPUs"),
    ({"precision": "fp3"}, "line 2: precision: 'fp3' is not one of bf16, fp16,"),
    ({"engine": "tgi-x"}, "line 2: engine: 'tgi-x' is not one of vllm, sglang, tensorrt-llm"),
    ({"concurrency": "lots"}, "line 2: concurrency: 'lots' is not a whole number or 'max'"),
    ({"concurrency": 4, "rate": 1}, "line 2: give one of concurrency and rate, not both"),
    ({"rate": -1}, "line 2: rate: must be a positive number of requests/s (got -1.0)"),
    ({"simulate": "perhaps"}, "line 2: simulate: must be true or false (got 'perhaps')"),
    ({"max_num_seqs": 0}, "line 2: max_num_seqs: must be a whole number from 1 to 1,000,000 (got 0)"),
    ({"output_tokens": 0, "rate": 1}, "line 2: output_tokens: the performance model needs at least 1 output token"),
])
def test_a_bad_jsonl_key_is_one_line_with_its_line_number_and_key(tmp_path: Path, extra: dict[str, object],
                                                                  line_error: str) -> None:
    out = _batch(tmp_path, ["", json.dumps({**GOOD, **extra}), json.dumps(GOOD)])
    assert len(out) == 2 and "error" not in out[1]
    err = str(out[0]["error"])
    assert "\n" not in err and err.startswith(line_error), err


def test_missing_keys_and_non_objects_name_the_line(tmp_path: Path) -> None:
    short = {k: v for k, v in GOOD.items() if k != "output_tokens"}
    out = _batch(tmp_path, [json.dumps(short), "[1]", "not json", json.dumps({**GOOD, "model": "no-such-model"})])
    assert out[0]["error"] == "line 1: output_tokens: missing (every line needs model, gpu, prompt_tokens, " \
                              "output_tokens)"
    assert out[1]["error"] == "line 2: expected a JSON object"
    assert str(out[2]["error"]).startswith("line 3: not JSON: ")
    assert str(out[3]["error"]).startswith("line 4: unknown model 'no-such-model'")


@pytest.mark.parametrize("flags,error", [
    (["--tp", "0"], "error: --tp: must be at least 1 (got 0)"),
    (["--engine", "tgi-x"], "error: --engine: 'tgi-x' is not one of vllm, sglang, tensorrt-llm"),
    (["--concurrency", "4", "--rate", "1"], "error: give one of --concurrency and --rate, not both"),
    (["--max-num-seqs", "0"], "error: --max-num-seqs: must be a whole number from 1 to 1,000,000 (got 0)"),
    (["--output-tokens", "0", "--rate", "1"],
     "error: --output-tokens: the performance model needs at least 1 output token"),
])
def test_the_same_rules_name_the_flag(flags: list[str], error: str) -> None:
    r = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b-instruct", "--gpu", "L4", *flags])
    assert r.exit_code == 2
    assert [ln for ln in r.stderr.splitlines() if ln.strip()] == [error]


def test_flags_and_a_jsonl_line_give_the_same_figures(tmp_path: Path) -> None:
    line = {**GOOD, "tp": 2, "concurrency": 8, "ttft_p95_ms": 2000, "itl_p95_ms": 60, "max_num_seqs": 64}
    [from_jsonl] = _batch(tmp_path, [json.dumps(line)])
    r = runner.invoke(app, ["estimate", "--model", "llama-3.1-8b-instruct", "--gpu", "L4", "--precision", "fp8",
                            "--prompt-tokens", "512", "--output-tokens", "128", "--tp", "2", "--concurrency", "8",
                            "--ttft-p95-ms", "2000", "--itl-p95-ms", "60", "--max-num-seqs", "64",
                            "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == from_jsonl


def test_the_model_is_the_one_parser() -> None:
    q = EstimateQuery.from_jsonl({**GOOD, "concurrency": "max", "rate": None}, line=7)
    assert (q.concurrency, q.tp, q.engine, q.where("tp")) == ("max", 1, "vllm", "line 7: tp")
    assert EstimateQuery.from_flags(**{**GOOD, "concurrency": "16"}).concurrency == 16
    with pytest.raises(SpecError) as e:
        EstimateQuery.from_flags(**{**GOOD, "tp": 0, "pp": 0})
    assert e.value.problems == ["--tp: must be at least 1 (got 0); --pp: must be at least 1 (got 0)"]
