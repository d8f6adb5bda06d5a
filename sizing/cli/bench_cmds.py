"""`llmcap bench`, `llmcap verify`, `llmcap calibrate`: measure a deployed endpoint, judge it against
its plan, and feed the measurement back as a local calibration overlay.

httpx, asyncio and the planner are imported inside the commands so `llmcap plan` start-up is unaffected.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from pathlib import Path
from typing import Any

import typer

from sizing.cli.common import TableOrJson, console, emit_json, guarded
from sizing.errors import CheckFailedError, LlmcapError, SpecError
from sizing.plan import Plan


def _plan_for(stack_file: Path | None, plan_file: Path | None) -> tuple[Plan | None, str]:
    """The plan from --plan, else planned from the stack (with the user's overlay, as `llmcap plan` does)."""
    from sizing.planning.saved_plan import load_plan_file

    if plan_file is not None:
        return load_plan_file(plan_file), f"plan from {plan_file}"
    if stack_file is None:
        return None, ""
    from sizing.planning.planner import plan_stack
    from sizing.stack import load_stack

    return plan_stack(load_stack(stack_file)), f"plan computed from {stack_file}"


def _fmt(v: float | None, digits: int = 1) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{digits}f}"


def _print_runs(res: Any) -> None:
    from sizing.report.format import fitted_table
    from sizing.spec import describe_targets

    run0 = res.runs[0]
    slo = describe_targets(run0.targets())
    headers = ["load", "sent", "errors", "TTFT p50/p95/p99 ms", "ITL p50/p95/p99 ms", "TPOT p95 ms", "out tok/s",
               "req/s", "goodput req/s", "SLO"]
    cells = []
    for r in res.runs:
        unit = "conc" if r.mode == "concurrency" else "req/s"
        cells.append([f"{r.load:g} {unit}{' (planned)' if r.planned else ''}", str(r.requests_sent), str(r.errors),
                      " / ".join(_fmt(x, 0) for x in (r.ttft_ms.p50, r.ttft_ms.p95, r.ttft_ms.p99)),
                      " / ".join(_fmt(x, 1) for x in (r.itl_ms.p50, r.itl_ms.p95, r.itl_ms.p99)),
                      _fmt(r.tpot_ms.p95), _fmt(r.output_tokens_per_s), _fmt(r.requests_per_s, 2),
                      _fmt(r.goodput_requests_per_s, 2), "met" if r.meets_slo else "MISSED"])
    c = console()
    c.print(fitted_table(f"llmcap bench {res.endpoint} ({res.served_model}, {res.api}); SLO {slo or 'none measured'}",
                         headers, cells, c.width, right=tuple(h for h in headers if h not in ("load", "SLO"))))
    for r in res.runs:
        for line in r.missed:
            c.print(f"MISSED at {r.load:g} {'conc' if r.mode == 'concurrency' else 'req/s'}: {line}", highlight=False)
    for n in res.notes:
        c.print(f"note: {n}", highlight=False)


def measure(base_url: str, api_key: str | None, st: Any, plan: Plan | None, notes: list[str], points: list[Any],
            share: float, under_test: float | None, model: str | None, api: str, ignore_eos: bool, limits: Any,
            seed: int, out: Path | None) -> Any:
    """One endpoint under the load points, the same seeded prompts and arrivals for every endpoint; the
    results (saved to `out` after each point when given)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from sizing.measure import metrics
    from sizing.measure.client import MODELS_DEADLINE_S, Target, preflight, run_load
    from sizing.measure.results import BenchResults
    from sizing.measure.workload import RequestFactory

    w = st.workload
    duration, request_timeout = limits.duration_s, limits.request_timeout_s
    notes = list(notes)
    listed = preflight(base_url, api_key, min(MODELS_DEADLINE_S, request_timeout))
    planned_name = plan.pools[0].vllm.served_model_name if plan else None
    if model:
        served = model
    elif planned_name and (not listed or planned_name in listed):
        served = planned_name
    elif listed:
        served = listed[0]
        if planned_name:
            notes.append(f"the server does not list the plan's model {planned_name!r}; benched {served!r}")
    else:
        raise SpecError(f"{base_url}/v1/models lists no model; pass --model NAME")
    target = Target(base_url=base_url, model=served, api=api, api_key=api_key, ignore_eos=ignore_eos)
    factory = RequestFactory(w, seed)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")

    runs: list[Any] = []

    def results(final: bool) -> BenchResults:
        counted = {r.prompt_tokens_counted_by for r in runs if r.completed}
        extra = [] if final else [f"partial: {len(runs)} of {len(points)} load points measured"]
        if counted == {"target"}:
            extra.append("the server sent no usage.prompt_tokens: prompt tokens are the word count of the "
                         "prompts (one token per word in common tokenizers)")
        return BenchResults(endpoint=base_url, served_model=served, api=api, stack=st.name, started_at=started,
                            seed=seed, demand_share=share, replicas_under_test=under_test,
                            workload=w.model_dump(mode="json"), runs=runs, plan=plan, notes=notes + extra)

    def save(res: BenchResults) -> None:
        """Whole or not at all: a temporary file beside the target, then moved over it."""
        if out is None:
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
        try:
            tmp.write_text(res.model_dump_json(indent=2) + "\n", encoding="utf-8")
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=False) as progress:
        for i, pt in enumerate(points):
            label = f"{pt.load:g} {'concurrent' if pt.mode == 'concurrency' else 'req/s'}"
            task = progress.add_task(f"{label}: starting", total=duration)

            def tick(done: int, errors: int, elapsed: float, task: Any = task, label: str = label) -> None:
                progress.update(task, completed=min(elapsed, duration),
                                description=f"{label}: {done} done, {errors} errors")

            records = run_load(target, factory, pt.mode, pt.load, limits, seed + i, tick)
            progress.update(task, completed=duration)
            runs.append(metrics.aggregate(records, mode=pt.mode, load=pt.load, duration_s=duration,
                                          targets=w.slo.targets(), planned=pt.planned))
            if i + 1 < len(points):
                save(results(final=False))  # what is measured stays on disk if a later point dies

    res = results(final=True)
    save(res)
    return res


@guarded
def bench(
    endpoint: str | None = typer.Argument(None, help="OpenAI-compatible server, e.g. http://127.0.0.1:8000"),
    stack: Path = typer.Option(..., "--stack", help="stack file: request shape, SLO and planned load"),
    plan_file: Path | None = typer.Option(None, "--plan", help="plan JSON (default: plan the stack)"),
    concurrency: list[int] | None = typer.Option(None, "--concurrency", help="closed-loop concurrency; repeat"),
    rate: list[float] | None = typer.Option(None, "--rate", help="open-loop Poisson requests/s; repeat"),
    duration: float = typer.Option(60.0, "--duration", help="seconds of load per point"),
    sweep: bool = typer.Option(True, "--sweep/--no-sweep", help="with no explicit load: 0.5×, 1×, 1.5× planned"),
    replicas: float | None = typer.Option(None, "--replicas",
                                          help="replicas behind ENDPOINT (default: all the plan's replicas)"),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="environment variable holding the API key"),
    model: str | None = typer.Option(None, "--model", help="served model name (default: the plan's, else /v1/models)"),
    api: str = typer.Option("completions", "--api", help="completions | chat"),
    ignore_eos: bool = typer.Option(True, "--ignore-eos/--no-ignore-eos", help="ask for exactly max_tokens"),
    request_timeout: float = typer.Option(600.0, "--request-timeout", help="seconds per request"),
    max_requests: int = typer.Option(100_000, "--max-requests", help="cap per load point"),
    seed: int = typer.Option(0, "--seed"),
    out: Path | None = typer.Option(None, "--out", help="write the results JSON here (for verify, calibrate)"),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    endpoints: list[str] | None = typer.Option(
        None, "--endpoint", help="NAME=URL, repeat to bench several engines side by side with the same seed, prompts "
                                 "and arrivals (NAME vllm or sglang: measured against that engine's plan); --out is "
                                 "then a folder of NAME.json"),
) -> None:
    """Load-test an endpoint with requests shaped like the stack's workload; TTFT, ITL, TPOT, goodput."""
    from sizing.cli.extras import require

    require("llmcap bench", "httpx")  # the load generator's HTTP client (the `bench` extra)
    from sizing.measure.client import RunLimits, normalize_endpoint
    from sizing.measure.workload import load_points
    from sizing.stack import load_stack

    if api not in ("completions", "chat"):
        raise SpecError(f"--api: {api!r} is not one of completions, chat")
    for name, v in (("--duration", duration), ("--request-timeout", request_timeout)):
        if not (v > 0 and math.isfinite(v)):
            raise SpecError(f"{name}: must be a positive number of seconds (got {v})")
    if max_requests < 1:
        raise SpecError(f"--max-requests: must be at least 1 (got {max_requests})")
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise SpecError(f"--api-key-env: ${api_key_env} is not set or empty")
    if (endpoint is None) == (not endpoints):
        raise SpecError("give one ENDPOINT, or several --endpoint NAME=URL to compare engines (not both)")
    st = load_stack(stack)
    w = st.workload
    notes: list[str] = []
    try:
        plan, how = _plan_for(stack, plan_file)
        notes.append(how)
    except LlmcapError as e:
        if plan_file is not None:
            raise
        plan = None
        notes.append(f"no plan ({e.problems[0]}); pass --plan PLAN.json to verify or calibrate these results")
    demand_replicas = sum(p.replicas_for_demand for p in plan.pools) if plan else None
    if replicas is not None and not (replicas > 0 and math.isfinite(replicas)):
        raise SpecError(f"--replicas: must be positive (got {replicas})")
    under_test = replicas if replicas is not None else (float(sum(p.replicas for p in plan.pools)) if plan else None)
    share = min(1.0, under_test / demand_replicas) if under_test and demand_replicas else 1.0
    points = load_points(w, concurrency, rate, sweep, share)

    limits = RunLimits(duration_s=duration, request_timeout_s=request_timeout, max_requests=max_requests)
    if endpoints:
        from sizing.cli.bench_multi import bench_side_by_side
        from sizing.planning.planner import plan_stack

        bench_side_by_side(endpoints, st, plan, notes, points, share, under_test, api_key, model, api, ignore_eos,
                           limits, seed, out, fmt, plan_file, measure, check_sent, plan_stack)
        return
    res = measure(normalize_endpoint(str(endpoint)), api_key, st, plan, notes, points, share, under_test, model, api,
                  ignore_eos, limits, seed, out)
    if fmt == TableOrJson.json:
        emit_json(res.model_dump(mode="json"))
    else:
        _print_runs(res)
        if out is None:
            typer.echo("results not saved; pass --out FILE to verify or calibrate them later", err=True)
    check_sent(res.runs, duration)


def check_sent(runs: list[Any], duration: float, where: str = "") -> None:
    """No request sent is bad input (exit 2); every request failed is a failed check (exit 1)."""
    sent = sum(r.requests_sent for r in runs)
    if sent == 0:
        raise SpecError(f"{where}no request was sent in {duration:g} s per load point; raise --duration")
    if all(r.completed == 0 for r in runs):
        kinds = sorted({k for r in runs for k in r.error_kinds})
        raise CheckFailedError(f"{where}all {sent} requests failed ({', '.join(kinds)}); check --model, --api and "
                               "the server log")


def _smoke(endpoint: str, api_key_env: str | None, models: list[str], wait_s: float) -> None:
    """`verify --smoke`: the deployment's smoke check (sizing/measure/smoke.py) against any endpoint."""
    from sizing.measure.smoke import SmokeFailure, check

    if not endpoint.startswith(("http://", "https://")):
        raise SpecError(f"--smoke: {endpoint!r} is not an http(s):// URL")
    if not models:
        raise SpecError("--model: name the served model to ask (repeat it for several)")
    if wait_s < 0:
        raise SpecError(f"--wait: must be >= 0 s (got {wait_s:g})")
    api_key = os.environ.get(api_key_env, "") if api_key_env else ""
    if api_key_env and not api_key:
        raise SpecError(f"--api-key-env: ${api_key_env} is not set or empty")
    try:
        answers = check(endpoint, api_key, models, wait_s)
    except SmokeFailure as e:
        raise CheckFailedError(f"smoke: FAIL {e}") from None
    typer.echo("smoke: ok " + "; ".join(f"{a.model} {a.path} {a.seconds:.1f} s: {a.text[:40]!r}" for a in answers))


@guarded
def verify(
    results_file: Path | None = typer.Argument(None, help="results JSON from llmcap bench --out"),
    smoke: str | None = typer.Option(None, "--smoke", help="instead: send the deployment's smoke check (one chat "
                                     "and one completion request per --model) to this endpoint URL"),
    model: list[str] = typer.Option([], "--model", help="with --smoke: a served model name (repeatable)"),
    api_key_env: str | None = typer.Option(None, "--api-key-env",
                                           help="with --smoke: environment variable holding the API key"),
    wait: float = typer.Option(0.0, "--wait", help="with --smoke: seconds to keep retrying an endpoint still "
                               "starting (refused connections, 5xx, a model not yet listed)"),
    stack: Path | None = typer.Option(None, "--stack", help="plan this stack to compare with"),
    plan_file: Path | None = typer.Option(None, "--plan", help="plan JSON to compare with"),
    demand_share: float | None = typer.Option(None, "--demand-share",
                                              help="share of the plan's demand the endpoint carries"),
    max_error_rate: float = typer.Option(0.01, "--max-error-rate", help="failed requests share allowed"),
    tolerance: float | None = typer.Option(None, "--tolerance", help="allowed gap for throughput and goodput "
                                           "(default 0.2; with --stage, the model's held-out goodput range)"),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    stage: str | None = typer.Option(None, "--stage", help="rollout stage judged: canary | ten-percent | full "
                                     "(its demand share and tolerance, llmcap rollout)"),
    eval_file: Path | None = typer.Option(None, "--eval", help="the quality gate's verdict (llmcap eval --format "
                                          "json > eval.json), judged as one more criterion"),
) -> None:
    """Pass/fail of a bench run against the plan and SLO, with the gap to each prediction; or, with --smoke,
    whether an endpoint answers each model with the API key. Exit 1 on failure."""
    if smoke is not None:
        if results_file is not None:
            raise SpecError("verify: give a results file or --smoke ENDPOINT, not both")
        _smoke(smoke, api_key_env, model, wait)
        return
    if results_file is None:
        raise SpecError("verify: give a results file (llmcap bench --out) or --smoke ENDPOINT")
    from sizing.measure.results import load_results
    from sizing.measure.verify import check_inputs, criteria

    res = load_results(results_file)
    if plan_file is None and stack is not None:
        from sizing.planning.planner import plan_stack
        from sizing.stack import load_stack

        plan: Plan | None = plan_stack(stack_for_engine_benched(load_stack(stack), res))
    else:
        plan, _ = _plan_for(None, plan_file)
    plan = plan or res.plan
    if plan is None:
        raise SpecError(f"{results_file} holds no plan; pass --plan PLAN.json or --stack STACK_FILE")
    share = demand_share if demand_share is not None else res.demand_share
    if stage is not None:
        from sizing.catalog.lookup import load_catalog
        from sizing.measure.rollout import stage as rollout_stage

        st = rollout_stage(plan, load_catalog().calibration, stage)
        share = demand_share if demand_share is not None else st.demand_share
        tolerance = st.tolerance if tolerance is None else tolerance
    tolerance = 0.2 if tolerance is None else tolerance
    check_inputs(share, max_error_rate, tolerance)
    run, rows = criteria(res, plan, share, max_error_rate, tolerance)
    if eval_file is not None:
        from sizing.measure.quality import quality_criterion

        rows.append(quality_criterion(eval_file))
    failed = [c.name for c in rows if c.passed is False]
    if fmt == TableOrJson.json:
        emit_json({"results": str(results_file), **({"stage": stage} if stage else {}),
                   "judged_run": {"mode": run.mode, "load": run.load},
                   "passed": not failed, "failed": failed,
                   "criteria": [{"name": c.name, "measured": c.measured, "limit": c.limit, "predicted": c.predicted,
                                 "gap_pct": c.gap_pct, "unit": c.unit, "passed": c.passed, "detail": c.detail}
                                for c in rows]})
    else:
        from sizing.report.format import fitted_table

        cells = [[c.name + (f" ({c.detail})" if c.detail else ""), f"{_fmt(c.measured)} {c.unit}", _fmt(c.limit),
                  _fmt(c.predicted), "–" if c.gap_pct is None else f"{c.gap_pct:+.0f}%",
                  "info" if c.passed is None else ("PASS" if c.passed else "FAIL")] for c in rows]
        con = console()
        con.print(fitted_table(f"llmcap verify: {results_file.name} at {run.mode} {run.load:g} against plan "
                               f"{plan.stack} ({', '.join(f'{p.replicas}× {p.gpu}' for p in plan.pools)})",
                               ["criterion", "measured", "limit", "predicted", "gap", "result"], cells, con.width,
                               right=("measured", "limit", "predicted", "gap")))
        what = f"verify --stage {stage}" if stage else "verify"
        typer.echo(f"{what}: PASS" if not failed else f"{what}: FAIL ({'; '.join(_failing(rows))})")
    if failed:
        raise typer.Exit(1)


def _failing(rows: list[Any]) -> list[str]:
    """Each failed criterion with its measured figure and limit, e.g. "ITL p95 <= SLO: 31.2 ms, limit 25"."""
    return [f"{c.name}: {_fmt(c.measured)} {c.unit}" + (f", limit {_fmt(c.limit)}" if c.limit is not None else "")
            + (f", predicted {_fmt(c.predicted)}" if c.limit is None and c.predicted is not None else "")
            for c in rows if c.passed is False]


def stack_for_engine_benched(st: Any, res: Any) -> Any:
    """A stack that allows several engines, narrowed to the engine the results were measured against (their
    plan's pools say which), so the prediction is that engine's and the overlay entry is keyed by it."""
    if len(st.workload.engines) == 1:
        return st
    from dataclasses import replace

    benched = {p.engine for p in res.plan.pools} if res.plan is not None else set()
    if len(benched) != 1 or next(iter(benched)) not in st.workload.engines:
        raise SpecError(f"{st.name} allows {', '.join(st.workload.engines)} and the results do not say which engine "
                        "was benched; pass --plan PLAN.json, or bench with --endpoint ENGINE=URL")
    return replace(st, workload=st.workload.for_engine(benched.pop()))


@guarded
def calibrate(
    from_: Path = typer.Option(..., "--from", help="results JSON from llmcap bench --out"),
    stack: Path | None = typer.Option(None, "--stack", help="plan this stack for the predictions"),
    plan_file: Path | None = typer.Option(None, "--plan", help="plan JSON for the predictions"),
    pool: str | None = typer.Option(None, "--pool", help="the pool benched, when the plan has several"),
    replicas: float | None = typer.Option(None, "--replicas", help="replicas behind the endpoint"),
    overlay: Path | None = typer.Option(None, "--overlay",
                                        help="overlay file (default $LLMCAP_CALIBRATION_OVERLAY or "
                                             "~/.config/llmcap/calibration_overlay.json)"),
    fmt: TableOrJson = typer.Option(TableOrJson.table, "--format"),
) -> None:
    """Turn measured goodput into a local calibration overlay that later plans apply (bundled data untouched)."""
    from sizing.measure.calibrate import entry_from_results
    from sizing.measure.results import load_results
    from sizing.perf.overlay import update_overlay

    res = load_results(from_)
    # the stack is planned without the overlay so the prediction is the bundled model's own
    plan: Plan | None
    if plan_file is None and stack is not None:
        from sizing.planning.planner import plan_stack
        from sizing.stack import load_stack

        plan = plan_stack(stack_for_engine_benched(load_stack(stack), res), goodput_scale=None)
    else:
        plan, _ = _plan_for(None, plan_file)
    plan = plan or res.plan
    if plan is None:
        raise SpecError(f"{from_} holds no plan; pass --plan PLAN.json or --stack STACK_FILE")
    n = replicas if replicas is not None else res.replicas_under_test
    if n is None:
        raise SpecError("how many replicas served the bench is unknown; pass --replicas N")
    entry = entry_from_results(res, plan, n, pool, str(from_))
    ov, path = update_overlay(entry, overlay)
    if fmt == TableOrJson.json:
        emit_json({"overlay": str(path), "entry": entry.model_dump(mode="json")})
        return
    scaled = ov.goodput_scale(entry.gpu, entry.engine, entry.model)
    typer.echo(f"wrote {path}")
    typer.echo(f"{entry.gpu}/{entry.engine}/{entry.model}: goodput × {entry.goodput_scale:.3f} "
               f"({entry.measured_goodput_output_tokens_per_s_per_replica:,.0f} measured vs "
               f"{entry.predicted_goodput_output_tokens_per_s_per_replica:,.0f} predicted output tokens/s per replica)"
               + (f"; ITL p95 × {entry.itl_p95_scale:.2f}" if entry.itl_p95_scale else "")
               + (f"; TTFT p95 × {entry.ttft_p95_scale:.2f}" if entry.ttft_p95_scale else ""))
    if entry.lower_bound:
        typer.echo("note: no run left the SLO, so the true goodput is at least this")
    if scaled:
        typer.echo("the next llmcap plan applies it and lists it under assumptions; the bundled calibration "
                   "is unchanged")
