"""Checks of what a stack file means, beyond its schema: fast (no planning), one line each.

Errors (the stack cannot be planned as written, exit 2):
- more spare replicas than max(2, the requests in flight): no redundancy scheme (sizing.spec
  REDUNDANCY_ALWAYS_ALLOWED);
- prompt + output (p95) beyond the model's context (config.json max_position_embeddings);
- every accepted precision needs a pre-quantized checkpoint and none is given.
Warnings (it plans, but probably not what was meant):
- unit-suspicious SLOs: ITL p95 under 1 ms, TTFT p95 under 10 ms ("did you mean 30 ms?": ×1000, a value
  written in seconds);
- a pre-quantized precision in the list without its checkpoint (the planner skips it);
- redundancy exceeding demand: more spare replicas than requests in flight (Little's law for a rate:
  in flight = rate × (TTFT + output tokens × ITL), at the SLO's latencies, an upper bound).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sizing.humanize import num
from sizing.spec import REDUNDANCY_ALWAYS_ALLOWED

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import ModelArch
    from sizing.spec import WorkloadSpec
    from sizing.stack import Stack

ITL_SUSPICIOUS_MS = 1.0
TTFT_SUSPICIOUS_MS = 10.0


def context_problem(model: ModelArch, w: WorkloadSpec) -> str | None:
    """One line when prompt + output (p95) exceed the model's context, else None."""
    if w.context_tokens <= model.max_position_embeddings:
        return None
    what = "max_context_tokens" if w.max_context_tokens else "prompt_tokens + output_tokens (p95)"
    return (f"llmcap:workload.{what}: {w.context_tokens:,} tokens exceed the {model.max_position_embeddings:,}-token "
            f"context of {model.hf_id}; shorten prompts or outputs, or choose a model with a longer context")


_SUSPICIOUS_MS = {"itl": ITL_SUSPICIOUS_MS, "tpot": ITL_SUSPICIOUS_MS, "ttft": TTFT_SUSPICIOUS_MS}


def slo_floor_problems(w: WorkloadSpec, cat: Catalog) -> list[str]:
    """Targets no deployment can meet, one line each naming the bound: every engine step costs at least its
    fitted CPU overhead (perf_calibration.json step_overhead_ms.<engine>, sizing.perf.step), whatever the GPU,
    so a per-token target (ITL, TPOT) or a TTFT below one step, an E2E below two (a prefill and a decode
    step), or a per-user rate above one token per step is below the fastest candidate's floor. Validate
    and plan both refuse them (exit 2), before any search."""
    step_ms = min(cat.calibration.overhead_s(e) for e in w.engines) * 1000.0
    out = []
    for m, q, v in w.slo.targets():
        floor_ms = step_ms * (2 if m == "e2e" else 1)
        if v < floor_ms:
            what = "two engine steps (a prefill and a decode)" if m == "e2e" else "one engine step"
            slip = _SUSPICIOUS_MS.get(m)
            hint = f"; did you mean {num(v * 1000)} ms?" if slip is not None and v < slip else ""
            out.append(f"llmcap:workload.slo.{m}.{q}: {num(v)} ms is below {what}, {num(floor_ms)} ms with "
                       f"{w.engine} on any GPU (its fitted per-step overhead); no plan can meet it: "
                       f"raise it to at least {num(floor_ms)} ms{hint}")
    tps = w.traffic.tokens_per_s_per_user
    if tps is not None and tps > 1000.0 / step_ms:
        out.append(f"llmcap:workload.traffic.tokens_per_s_per_user: {num(tps)} tokens/s is above one token per "
                   f"engine step ({num(1000.0 / step_ms)} tokens/s with {w.engine} on any GPU); no plan can "
                   "serve it")
    return out


def redundancy_problem(redundancy: int, demand: int, what: str) -> str:
    """The one line that refuses more spares than max(REDUNDANCY_ALWAYS_ALLOWED, `demand`) (sizing.spec)."""
    most = max(REDUNDANCY_ALWAYS_ALLOWED, demand)
    return (f"llmcap:hardware.redundancy: {redundancy:,} spare replicas is more than the {most:,} allowed (N+"
            f"{REDUNDANCY_ALWAYS_ALLOWED} or 2N, N = {demand:,} {what}): set it to at most {most:,}; to run more "
            "replicas, plan for the traffic they would serve (llmcap:workload.traffic)")


def meaning_checks(stack: Stack, cat: Catalog) -> tuple[list[str], list[str]]:
    """(errors, warnings) for a stack whose names already resolve (sizing.catalog.names.check_names)."""
    w, hw = stack.workload, stack.hardware
    errors: list[str] = []
    warnings: list[str] = []
    model = cat.model(w.model)
    ctx = context_problem(model, w)
    if ctx:
        errors.append(ctx)
    errors += slo_floor_problems(w, cat)
    missing = [p for p in w.precisions if cat.precision(p).needs_prequantized_checkpoint and p not in w.checkpoints]
    for p in missing:
        line = (f"llmcap:workload.precision: {p} needs a pre-quantized checkpoint of {model.hf_id}: set "
                f"llmcap:workload.checkpoints.{p} to its Hugging Face id")
        if len(missing) == len(w.precisions):
            errors.append(line)
        else:
            warnings.append(line + f" (without it the planner skips {p})")
    slo = w.slo
    for m, q, v in slo.targets() if not errors else ():  # a target below the engine's floor is an error already
        floor_ms, what = ((ITL_SUSPICIOUS_MS, "per token") if m in ("itl", "tpot") else
                          (TTFT_SUSPICIOUS_MS, "to the first token") if m == "ttft" else (None, ""))
        if floor_ms is not None and v < floor_ms:
            warnings.append(f"llmcap:workload.slo.{m}.{q}: {num(v)} ms is under {floor_ms:g} ms {what}; "
                            f"did you mean {num(v * 1000)} ms?")
    per_token = slo.per_token_ms()
    if w.traffic.tokens_per_s_per_user is not None and per_token is not None \
            and w.traffic.tokens_per_s_per_user > 1000.0 / per_token:
        warnings.append(f"llmcap:workload.traffic.tokens_per_s_per_user: {num(w.traffic.tokens_per_s_per_user)} "
                        f"tokens/s needs a gap of {num(1000.0 / w.traffic.tokens_per_s_per_user)} ms per token; the "
                        f"per-token target allows {num(per_token)} ms, so the plan meets the target, not this rate: "
                        "tighten the ITL/TPOT target or lower the rate")
    if w.traffic.concurrent_users is not None:
        in_flight = float(w.traffic.concurrent_users)
        how = f"{w.traffic.concurrent_users:,} concurrent users"
    else:
        rate = float(w.traffic.peak_requests_per_s or 0.0)
        # Little's law at the slowest latency the SLO allows (no bound when it sets none)
        e2e = [v for m, _, v in slo.targets() if m == "e2e"]
        e2e_ms = max(e2e) if e2e else math.inf
        if not e2e:
            e2e_ms = slo.bound_ms("ttft", "p95") + w.output_tokens.mean * (slo.per_token_ms() or math.inf)
        in_flight = rate * e2e_ms / 1000
        how = f"{num(rate)} req/s at the SLO's latencies (at most {num(in_flight)} requests in flight)"
    # (no bound without a latency target that bounds the time in flight: in_flight is then infinite)
    if math.isfinite(in_flight) and hw.redundancy > max(REDUNDANCY_ALWAYS_ALLOWED, math.ceil(in_flight)):
        errors.append(redundancy_problem(hw.redundancy, math.ceil(in_flight), f"requests in flight ({how})"))
    elif hw.redundancy > 0 and hw.redundancy >= in_flight:
        warnings.append(f"llmcap:hardware.redundancy: {hw.redundancy} spare replicas for {how}: more spares than "
                        "requests in flight; 1 is usually enough")
    return errors, warnings
