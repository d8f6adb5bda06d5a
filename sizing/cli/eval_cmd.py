"""`llmcap eval ENDPOINT --reference ENDPOINT`: the quality gate for a quantized (or any changed) deployment:
the same evaluation set through both endpoints (default: the bundled GSM8K test problems), greedy decoding,
exact match of the final answer; both accuracies with 95 % intervals, the paired drop, exit 1 when the
candidate falls more than --max-drop points below the reference (or the run is incomplete).
httpx (the `bench` extra) is imported inside the command."""

from __future__ import annotations

import math
import os
from pathlib import Path

import typer

from sizing.cli.common import TableOrJson, console, emit_json, guarded
from sizing.errors import SpecError


def _model_of(base_url: str, model: str | None, api_key: str | None, timeout_s: float) -> str:
    from sizing.measure.client import MODELS_DEADLINE_S, preflight

    listed = preflight(base_url, api_key, min(MODELS_DEADLINE_S, timeout_s))
    if model:
        return model
    if not listed:
        raise SpecError(f"{base_url}/v1/models lists no model; pass --model / --reference-model")
    return listed[0]


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


@guarded
def eval_(
    endpoint: str = typer.Argument(..., help="candidate OpenAI-compatible server, e.g. http://127.0.0.1:8000"),
    reference: str = typer.Option(..., "--reference", help="the approved (e.g. full-precision) server"),
    dataset: Path | None = typer.Option(None, "--dataset", help="JSONL with question and answer per line "
                                        "(default: the bundled GSM8K test set, 1,319 problems)"),
    limit: int | None = typer.Option(None, "--limit", help="the first N questions only"),
    max_drop: float = typer.Option(1.0, "--max-drop", help="allowed accuracy drop, points (percent)"),
    concurrency: int = typer.Option(8, "--concurrency", help="requests in flight per endpoint"),
    request_timeout: float = typer.Option(120.0, "--request-timeout", help="seconds per request"),
    time_limit: float = typer.Option(3600.0, "--time-limit", help="no new request after this many seconds"),
    max_tokens: int = typer.Option(512, "--max-tokens", help="completion tokens per answer"),
    api: str = typer.Option("chat", "--api", help="chat | completions"),
    model: str | None = typer.Option(None, "--model", help="candidate's served model (default: /v1/models)"),
    reference_model: str | None = typer.Option(None, "--reference-model", help="reference's served model"),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="environment variable holding the API key"),
    results: Path = typer.Option(Path("eval-results.jsonl"), "--results",
                                 help="answers appended here as they arrive; a rerun skips those already there"),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
) -> None:
    """Quality gate: the candidate's accuracy against the reference's on the same questions. Exit 1 on a drop."""
    from sizing.cli.extras import require

    require("llmcap eval", "httpx")
    from sizing.measure.client import normalize_endpoint
    from sizing.measure.evalset import load_evalset
    from sizing.measure.quality import Endpoint, Settings, evaluate, verdict

    if api not in ("chat", "completions"):
        raise SpecError(f"--api: {api!r} is not one of chat, completions")
    for name, secs in (("--request-timeout", request_timeout), ("--time-limit", time_limit)):
        if not (secs > 0 and math.isfinite(secs)):
            raise SpecError(f"{name}: must be a positive number of seconds (got {secs})")
    if not (0 <= max_drop < 100):
        raise SpecError(f"--max-drop: must be between 0 and 100 points (got {max_drop:g})")
    if concurrency < 1 or max_tokens < 1 or (limit is not None and limit < 1):
        raise SpecError("--concurrency, --max-tokens and --limit must be at least 1")
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise SpecError(f"--api-key-env: ${api_key_env} is not set or empty")
    items = load_evalset(dataset, limit)
    cand_url, ref_url = normalize_endpoint(endpoint), normalize_endpoint(reference)
    if cand_url == ref_url:
        raise SpecError("--reference: the same server as ENDPOINT; compare two deployments")
    cand = Endpoint("candidate", cand_url, _model_of(cand_url, model, api_key, request_timeout))
    ref = Endpoint("reference", ref_url, _model_of(ref_url, reference_model, api_key, request_timeout))
    settings = Settings(api=api, max_tokens=max_tokens, concurrency=concurrency, request_timeout_s=request_timeout,
                        time_limit_s=time_limit, api_key=api_key)

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("eval", total=None)
        answers = evaluate([ref, cand], items, settings, results, tick=lambda: bar.advance(task),
                           on_todo=lambda n: bar.update(task, total=n))
    v = verdict(ref, cand, items, answers, max_drop / 100.0)
    if fmt == TableOrJson.json:
        emit_json({"results": str(results), **v.model_dump(mode="json")})
    else:
        from rich.table import Table

        t = Table(title=f"llmcap eval: {len(items):,} questions ({dataset or 'GSM8K test, bundled'}), exact match "
                        "of the final answer, greedy")
        for col in ("endpoint", "role", "answered", "correct", "errors", "accuracy", "95% CI (Wilson)"):
            t.add_column(col, justify="left" if col in ("endpoint", "role") else "right")
        for a in (v.reference, v.candidate):
            t.add_row(a.endpoint, a.role, f"{a.answered:,}", f"{a.correct:,}", f"{a.errors:,}", _pct(a.accuracy),
                      f"{_pct(a.ci95[0])} – {_pct(a.ci95[1])}")
        console().print(t)
        typer.echo(f"drop: {v.drop * 100:.1f} points (paired 95% CI {v.drop_ci95[0] * 100:.1f} – "
                   f"{v.drop_ci95[1] * 100:.1f}), allowed {max_drop:g}")
        if not v.complete:
            typer.echo(f"incomplete: {v.judged:,} of {v.items:,} questions answered by both; rerun the same "
                       f"command to resume from {results}")
        typer.echo("eval: PASS" if v.passed else "eval: FAIL (" + (
            f"candidate accuracy {v.drop * 100:.1f} points below the reference, more than {max_drop:g}"
            if v.complete else "incomplete") + ")")
    if not v.passed:
        raise typer.Exit(1)
