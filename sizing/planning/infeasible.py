"""Why a stack has no feasible plan, and the cheapest nearby changes that would make it one: the
most informative rejection per GPU type, then a relaxed SLO, another precision, more GPU types or
another strategy, each re-planned by the caller's pricing function and shown in USD per month."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sizing.cost.money import usd_per_month
from sizing.errors import NoFeasiblePlanError
from sizing.spec import SLO_LABELS

if TYPE_CHECKING:
    from collections.abc import Callable

    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import ModelArch
    from sizing.planning.candidates import Evaluated
    from sizing.spec import HardwareSpec, Slo, WorkloadSpec
    from sizing.stack import Stack

    # the caller's pricing of a changed spec: (workload, hardware, strategy) -> cheapest feasible candidate
    Cheapest = Callable[[WorkloadSpec, HardwareSpec, str], Evaluated | None]

REASON_ORDER = ("misses-itl", "misses-ttft", "does-not-fit", "needs-checkpoint", "unsupported-precision",
                "no-price", "bad-parallelism", "not-offered", "fractional-gpu", "no-gpu-specs")


def worst_reasons(rejections: list[Any]) -> dict[str, tuple[str, str, str, str, int]]:
    """Per GPU: the most informative rejection (SLO misses first, then memory, then catalog)."""
    out: dict[str, tuple[str, str, str, str, int]] = {}
    rank = {c: i for i, c in enumerate(REASON_ORDER)}
    for r in rejections:
        cur = out.get(r.gpu)
        if cur is None or rank.get(r.reason, 99) < rank.get(cur[0], 99):
            out[r.gpu] = (r.reason, r.detail, r.instance_type, r.precision, r.tensor_parallel)
    return out


# Suggestions stay "nearby": an ITL target is relaxed at most to ITL_SUGGESTION_CAP_MS (or 4× the
# target, whichever is lower; slower than ~5 tokens/s is no longer a chat), and a suggestion costing
# more than SUGGESTION_MAX_USD_MONTH (or 3× the stack's budget) or NEARBY_FACTOR × the cheapest one is not
# shown, only counted ("a few times the cheapest feasible neighbour": 405B on A10G once suggested int4-awq
# at $951,219/month beside H100s at $160,717).
ITL_LADDER = (1.2, 1.4, 1.6, 2.0, 2.5, 3.0, 4.0)
TTFT_LADDER = (1.5, 2.0, 3.0, 5.0)
ITL_SUGGESTION_CAP_MS = 200.0
TTFT_SUGGESTION_CAP_MS = 10_000.0
SUGGESTION_MAX_USD_MONTH = 1_000_000.0
NEARBY_FACTOR = 3.0


def _targets(by_q: dict[str, float]) -> str:
    return ", ".join(f"{q} {v:g} ms" for q, v in by_q.items())


def _per_token_cap(ms: float) -> float:
    return min(max(ITL_SUGGESTION_CAP_MS, ms), ms * ITL_LADDER[-1])


def _ttft_cap(ms: float) -> float:
    return max(TTFT_SUGGESTION_CAP_MS, ms)


def _relaxable(slo: Slo) -> list[tuple[str, tuple[float, ...], Callable[[float], float]]]:
    """The targets the user set that a suggestion may relax (metric, ladder, cap of its largest target):
    the per-token metric (ITL, else TPOT) and TTFT, and E2E when neither is set. Targets the user did not
    set are never added."""
    metrics = {m for m, _, _ in slo.targets()}
    out: list[tuple[str, tuple[float, ...], Callable[[float], float]]] = []
    per_token = next((m for m in ("itl", "tpot") if m in metrics), None)
    if per_token:
        out.append((per_token, ITL_LADDER, _per_token_cap))
    if "ttft" in metrics:
        out.append(("ttft", TTFT_LADDER, _ttft_cap))
    if "e2e" in metrics and not out:
        out.append(("e2e", TTFT_LADDER, lambda ms: ms * TTFT_LADDER[-1]))
    return out


def condensed_problems(rejections: list[Any]) -> list[str]:
    """One line per GPU (its most informative rejection); a detail shared by every GPU becomes one line;
    GPUs without a datasheet row are one "skipped" line."""
    reasons = worst_reasons(rejections)
    skipped = sorted(g for g, (code, *_r) in reasons.items() if code == "no-gpu-specs")
    rest = {g: v for g, v in reasons.items() if v[0] != "no-gpu-specs"}
    details = {(code, detail) for (code, detail, *_r) in rest.values()}
    if len(rest) > 1 and len(details) == 1:
        problems = [f"every GPU: {next(iter(details))[1]}"]
    else:
        problems = [f"{gpu}: {code}: {detail}" for gpu, (code, detail, _i, _p, _t) in sorted(rest.items())]
    if skipped:
        problems.append(f"skipped (no datasheet row in gpus.csv): {', '.join(skipped)}")
    return problems


def infeasible_error(cat: Catalog, model: ModelArch, stack: Stack, strategy: str, main: Any,
                     cheapest: Cheapest) -> NoFeasiblePlanError:
    """Why nothing is feasible (per GPU type) and the cheapest nearby changes that work, each re-planned
    and priced: a relaxed SLO, another precision (with a checkpoint where it needs one), more GPUs.

    `cheapest(workload, hardware, strategy)`: the cheapest feasible candidate for a changed spec, priced as
    plan_stack prices it (sizing.planning.planner.cheapest_tuned: searched, finalists tuned and simulated)."""
    problems = condensed_problems(main.rejections)
    if not problems:
        problems = ["no instance type is allowed by the hardware section in this region"]
    w, hw = stack.workload, stack.hardware
    found: list[dict[str, Any]] = []

    def add(change: str, setting: dict[str, Any], ev: Evaluated | None) -> bool:
        if ev is None:
            return False
        found.append({"change": change, "set": setting, "plan": ev.cand.label(), "gpus": ev.gpus,
                      "usd_per_month": round(usd_per_month(ev.usd_per_hour), 2)})
        return True

    codes = {r.reason for r in main.rejections}
    if "misses-itl" in codes or "misses-ttft" in codes:
        for metric, ladder, cap_of in _relaxable(w.slo):
            given = dict((q, v) for m, q, v in w.slo.targets() if m == metric)
            for factor in ladder:
                if max(given.values()) * factor > cap_of(max(given.values())):
                    break
                relaxed = {q: round(v * factor, 1) for q, v in given.items()}
                w2 = w.model_copy(update={"slo": w.slo.model_validate(
                    {**w.slo.model_dump(exclude_none=True), metric: relaxed})})
                if add(f"{SLO_LABELS[metric]} {_targets(given)} → {_targets(relaxed)}",
                       {f"workload.slo.{metric}": relaxed}, cheapest(w2, hw, strategy)):
                    break
    for prec in ("fp8", "int4-awq"):
        if prec in w.precisions and (prec in w.checkpoints or not cat.precision(prec).needs_prequantized_checkpoint):
            continue
        fmt = cat.precision(prec)
        needs_ckpt = fmt.needs_prequantized_checkpoint and prec not in w.checkpoints
        unnamed_checkpoint = f"<{prec} checkpoint of {model.hf_id}>"
        extra = {"checkpoints": {**w.checkpoints, prec: unnamed_checkpoint}} if needs_ckpt else {}
        w2 = w.model_copy(update={"precision": list(dict.fromkeys(w.precisions + [prec])), **extra})
        ev = cheapest(w2, hw, strategy)
        if ev is not None and ev.cand.precision == prec:
            setting: dict[str, Any] = {"workload.precision": w2.precisions}
            if needs_ckpt:
                change = (f"{prec} with a pre-quantized checkpoint (set llmcap:workload.checkpoints.{prec} to its "
                          "Hugging Face id)")
                setting[f"workload.checkpoints.{prec}"] = unnamed_checkpoint
            elif prec in w.checkpoints:
                change = f"allow precision {prec} (checkpoint {w.checkpoints[prec]})"
            else:
                change = f"allow precision {prec} (quantized on load)"
            add(change, setting, ev)
    if hw.gpus or hw.instance_types:
        hw2 = hw.model_copy(update={"gpus": None, "instance_types": None})
        ev = cheapest(w, hw2, "auto" if strategy == "mixed" else strategy)
        if ev is not None:
            gpus = [*(hw.gpus or []), ev.cand.instance.gpu]
            hw3 = hw.model_copy(update={"gpus": gpus, "instance_types": None})
            add(f"allow {ev.cand.instance.gpu} (llmcap:hardware.gpus)", {"hardware.gpus": gpus,
                **({"hardware.instance_types": None} if hw.instance_types else {})},
                cheapest(w, hw3, "auto" if strategy == "mixed" else strategy))
    if strategy not in ("auto", "mixed"):
        add("strategy auto (every instance family)", {"hardware.strategy": "auto"}, cheapest(w, hw, "auto"))
    ceiling = SUGGESTION_MAX_USD_MONTH if stack.budget_usd_month is None else 3 * stack.budget_usd_month
    found.sort(key=lambda f: f["usd_per_month"])
    if found:
        ceiling = min(ceiling, NEARBY_FACTOR * found[0]["usd_per_month"])
    shown = [f for f in found if f["usd_per_month"] <= ceiling]
    dropped = len(found) - len(shown)
    suggestions = [f"{f['change']}: {f['plan']}, ${f['usd_per_month']:,.0f}/month" for f in shown]
    if shown and dropped:
        suggestions.append(f"{dropped} costlier change(s) over ${ceiling:,.0f}/month not shown")
    if not suggestions:
        per_token = w.slo.per_token_ms()
        tried = f"per-token targets up to {_per_token_cap(per_token):g} ms, " if per_token else ""
        under = f", under ${ceiling:,.0f}/month" if dropped else ""
        suggestions.append(
            f"no nearby change works ({tried}fp8/int4-awq, any GPU{under}): "
            "use a smaller model, shorter prompts/outputs, or fewer concurrent users")
    err = NoFeasiblePlanError(
        f"no feasible plan for {model.hf_id} in {stack.region} ({strategy})",
        [f"no deployment of {model.hf_id} meets the workload in {stack.region} (strategy {strategy}):"] + problems,
        rejections=[r.model_dump() for r in main.rejections], suggestions=suggestions)
    err.suggestion_details = shown
    return err
