"""Checks of what a stack file means, beyond its schema: fast (no planning), one line each.

Errors (the stack cannot be planned as written, exit 2):
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


def meaning_checks(stack: Stack, cat: Catalog) -> tuple[list[str], list[str]]:
    """(errors, warnings) for a stack whose names already resolve (sizing.catalog.names.check_names)."""
    w, hw = stack.workload, stack.hardware
    errors: list[str] = []
    warnings: list[str] = []
    model = cat.model(w.model)
    ctx = context_problem(model, w)
    if ctx:
        errors.append(ctx)
    missing = [p for p in w.precisions if cat.precision(p).needs_prequantized_checkpoint and p not in w.checkpoints]
    for p in missing:
        line = (f"llmcap:workload.precision: {p} needs a pre-quantized checkpoint of {model.hf_id}: set "
                f"llmcap:workload.checkpoints.{p} to its Hugging Face id")
        if len(missing) == len(w.precisions):
            errors.append(line)
        else:
            warnings.append(line + f" (without it the planner skips {p})")
    slo = w.slo
    for m, q, v in slo.targets():
        floor_ms, what = ((ITL_SUSPICIOUS_MS, "per token") if m in ("itl", "tpot") else
                          (TTFT_SUSPICIOUS_MS, "to the first token") if m == "ttft" else (None, ""))
        if floor_ms is not None and v < floor_ms:
            warnings.append(f"llmcap:workload.slo.{m}.{q}: {num(v)} ms is under {floor_ms:g} ms {what}; "
                            f"did you mean {num(v * 1000)} ms?")
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
    if hw.redundancy > 0 and hw.redundancy >= in_flight:
        warnings.append(f"llmcap:hardware.redundancy: {hw.redundancy} spare replicas for {how}: more spares than "
                        "requests in flight; 1 is usually enough")
    return errors, warnings
