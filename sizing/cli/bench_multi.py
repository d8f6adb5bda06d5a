"""`llmcap bench --endpoint vllm=URL --endpoint sglang=URL`: the same load points, seed, prompts and arrival
process against each endpoint in turn, then one side-by-side table (TTFT/ITL/TPOT/E2E percentiles, goodput
at the SLO, errors) and each endpoint measured against its own engine's plan. An endpoint that cannot be
reached, or whose every request fails, is reported and the others still are; the command then exits 1.
With --out DIR each endpoint's results go to DIR/NAME.json, which `llmcap calibrate` feeds into that
engine's overlay entry (the results carry the engine's plan, whose pools name the engine)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sizing.cli.common import TableOrJson, console, emit_json
from sizing.errors import CheckFailedError, LlmcapError, SpecError
from sizing.spec import Engine

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from sizing.plan import Plan
    from sizing.stack import Stack

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$")
ENGINE_NAMES: tuple[str, ...] = Engine.__args__  # type: ignore[attr-defined]


@dataclass
class Side:
    """One endpoint of the comparison: its plan, results, or why it has none."""

    name: str
    url: str
    plan: Plan | None
    results: Any = None
    error: str = ""


def parse_endpoints(items: list[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for item in items:
        name, sep, url = item.partition("=")
        if not sep or not NAME.match(name) or not url:
            raise SpecError(f"--endpoint {item[:80]!r}: expected NAME=URL, e.g. --endpoint sglang=http://127.0.0.1:30000")
        if name in {n for n, _ in out}:
            raise SpecError(f"--endpoint: {name!r} is given twice; name each endpoint once")
        out.append((name, url))
    return out


def engine_plan(st: Stack, name: str, plan: Plan | None, plan_file: Path | None, notes: list[str],
                planner: Callable[[Stack], Plan]) -> Plan | None:
    """The plan an endpoint is measured against: with --plan, that plan; for an endpoint named after an
    engine, the stack planned for that engine (its own performance model and flags); else the stack's plan."""
    if plan_file is not None or name not in ENGINE_NAMES:
        return plan
    try:
        return planner(replace(st, workload=st.workload.for_engine(name)))
    except LlmcapError as e:
        notes.append(f"{name}: no plan for engine {name} ({e.problems[0] if e.problems else e})")
        return None


def bench_side_by_side(items: list[str], st: Stack, plan: Plan | None, notes: list[str], points: list[Any],
                       share: float, under_test: float | None, api_key: str | None, model: str | None, api: str,
                       ignore_eos: bool, limits: Any, seed: int, out: Path | None, fmt: TableOrJson,
                       plan_file: Path | None, measure: Callable[..., Any], check_sent: Callable[..., None],
                       planner: Callable[[Stack], Plan]) -> None:
    """`measure`, `check_sent` (sizing.cli.bench_cmds's) and the planner (plan_stack) are handed in by the
    command: no import circle, and the import chain stays short."""
    from sizing.measure.client import normalize_endpoint

    sides: list[Side] = []
    for name, url in parse_endpoints(items):
        base = normalize_endpoint(url)
        own_notes = list(notes)
        p = engine_plan(st, name, plan, plan_file, own_notes, planner)
        side = Side(name, base, p)
        try:
            side.results = measure(base, api_key, st, p, own_notes, points, share, under_test, model, api,
                                   ignore_eos, limits, seed, out / f"{name}.json" if out is not None else None)
            check_sent(side.results.runs, limits.duration_s)
        except LlmcapError as e:
            side.error = e.problems[0] if e.problems else str(e)
        sides.append(side)
    if fmt == TableOrJson.json:
        emit_json({"kind": "llmcap-bench-side-by-side", "seed": seed, "endpoints": {
            s.name: {"endpoint": s.url, "error": s.error or None,
                     "results": s.results.model_dump(mode="json") if s.results is not None else None,
                     "predicted": predicted(s)} for s in sides}})
    else:
        print_side_by_side(sides, st, under_test)
    failed = [s for s in sides if s.error]
    if failed:
        raise CheckFailedError(f"{len(failed)} of {len(sides)} endpoints failed: "
                               + "; ".join(f"{s.name}: {s.error}" for s in failed))


def predicted(s: Side) -> dict[str, float] | None:
    """The engine's plan at its planned load: goodput per replica (output tokens/s), TTFT and ITL p95 (ms)."""
    if s.plan is None:
        return None
    pool = s.plan.pools[0]
    r = pool.per_replica
    return {"goodput_output_tokens_per_s_per_replica": r.goodput_output_tokens_per_s / (pool.goodput_scale or 1.0),
            "ttft_p95_ms": r.ttft_p95_ms, "itl_p95_ms": r.itl_p95_ms}


def measured_goodput_per_replica(s: Side, under_test: float | None) -> tuple[float | None, bool]:
    """The best SLO-meeting run's output tokens/s per replica behind the endpoint (None: no run met it), and
    whether a heavier run missed the SLO (else the figure is only a lower bound of the goodput)."""
    runs = s.results.runs if s.results is not None else []
    meeting = [r for r in runs if r.meets_slo]
    if not meeting:
        return None, False
    best = max(meeting, key=lambda r: r.output_tokens_per_s)
    saturated = any(not r.meets_slo and r.load > best.load for r in runs)
    return best.output_tokens_per_s / (under_test or 1.0), saturated


def _f(v: float | None, digits: int = 0) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{digits}f}"


def _trio(d: Any, digits: int) -> str:
    return " / ".join(_f(x, digits) for x in (d.p50, d.p95, d.p99))


def print_side_by_side(sides: list[Side], st: Stack, under_test: float | None) -> None:
    from rich.table import Table

    from sizing.spec import describe_targets

    t = Table(title=f"llmcap bench, side by side (same seed, prompts and arrivals); SLO "
                    f"{describe_targets(st.workload.slo.targets())}")
    for col in ("endpoint", "load", "sent", "errors", "TTFT p50/p95/p99 ms", "ITL p50/p95/p99 ms",
                "TPOT p50/p95/p99 ms", "E2E p50/p95/p99 ms", "out tok/s", "goodput req/s", "SLO"):
        t.add_column(col, justify="left" if col in ("endpoint", "load", "SLO") else "right")
    for s in sides:
        if s.results is None:
            t.add_row(s.name, "–", "–", "–", "–", "–", "–", "–", "–", "–", "FAILED")
            continue
        for r in s.results.runs:
            unit = "conc" if r.mode == "concurrency" else "req/s"
            t.add_row(s.name, f"{r.load:g} {unit}{' (planned)' if r.planned else ''}", str(r.requests_sent),
                      str(r.errors), _trio(r.ttft_ms, 0), _trio(r.itl_ms, 1), _trio(r.tpot_ms, 1),
                      _trio(r.e2e_ms, 0), _f(r.output_tokens_per_s), _f(r.goodput_requests_per_s, 2),
                      "met" if r.meets_slo else "MISSED")
    c = console()
    c.print(t)
    v = Table(title="measured vs predicted, per engine (goodput: output tokens/s per replica at the SLO)")
    for col in ("endpoint", "planned engine", "measured goodput", "predicted goodput", "measured ÷ predicted",
                "TTFT p95 ms (meas/pred)", "ITL p95 ms (meas/pred)"):
        v.add_column(col, justify="left" if col in ("endpoint", "planned engine") else "right")
    for s in sides:
        pred = predicted(s)
        meas, saturated = measured_goodput_per_replica(s, under_test)
        planned_run = s.results.planned_run() if s.results is not None and s.results.runs else None
        engine = s.plan.pools[0].engine if s.plan is not None else "–"
        ratio = meas / pred["goodput_output_tokens_per_s_per_replica"] if meas and pred and \
            pred["goodput_output_tokens_per_s_per_replica"] else None
        ttft = (planned_run.ttft_ms.p95 if planned_run else None, pred["ttft_p95_ms"] if pred else None)
        bound = "" if saturated or meas is None else "≥ "  # no heavier run missed the SLO: a lower bound
        v.add_row(s.name, engine, bound + _f(meas),
                  _f(pred["goodput_output_tokens_per_s_per_replica"]) if pred else "–",
                  bound + _f(ratio, 2), f"{_f(ttft[0])} / {_f(ttft[1])}",
                  f"{_f(planned_run.itl_ms.p95 if planned_run else None, 1)} / "
                  f"{_f(pred['itl_p95_ms'] if pred else None, 1)}")
    c.print(v)
    if any(m is not None and not sat for m, sat in (measured_goodput_per_replica(s, under_test) for s in sides)):
        c.print("≥: every run met the SLO, so the goodput is at least this; bench heavier loads to find it",
                highlight=False)
    for s in sides:
        if s.error:
            c.print(f"error: {s.name} ({s.url}): {s.error}", highlight=False)
        elif s.results is not None:
            for n in s.results.notes:
                c.print(f"note: {s.name}: {n}", highlight=False)
