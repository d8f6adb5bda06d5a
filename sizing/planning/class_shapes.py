"""Request classes in the analytic pre-search: each interactive class on its own lengths and targets.

A stack with request classes (`llmcap:workload.classes`, no trace) used to be judged in the pre-search as
one mean workload: the classes' weighted mean lengths, the longest class p95 and the tightest target of
any class (sizing.spec._merge_classes). That applies one class's target to another class's prompts: a
30,000-token document class with a 20 s TTFT target judged against a chat class's 300 ms rejects every
replica that prefills 30,000 tokens in more than 300 ms, though no request has that target. Here each
interactive class is sized alone (its own lengths, targets and share of the load); a candidate is
feasible when every class meets its own targets on it, and the mix's goodput per replica is what the
replay search (sizing.planning.fleet) starts from:

    requests/s of the mix per replica = 1 / Σ_c f_c / r_c

(f_c: class c's share of the requests; r_c: its goodput alone, requests/s per replica): a replica spends
f_c / r_c of each second's worth of the mix's requests on class c. The replay then checks the classes
mixed (shared) and apart (dedicated) on the actual interleaving, which this mean cannot see.
Units: requests/s and output tokens/s per replica; shares are fractions of requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from sizing.perf.load import Goodput

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.perf.replica import ReplicaConfig
    from sizing.spec import RequestClass, WorkloadSpec


def interactive_classes(w: WorkloadSpec) -> list[RequestClass]:
    """The stack's own interactive classes (none for a single-class stack or a trace's classes)."""
    return [c for c in w.classes or [] if not c.is_batch]


def class_load(w: WorkloadSpec, c: RequestClass) -> tuple[str, float]:
    """("rate", requests/s) or ("users", concurrent requests) of one class, as the stack gives it."""
    if c.traffic is not None and c.traffic.peak_requests_per_s is not None:
        return "rate", float(c.traffic.peak_requests_per_s)
    share = float(c.share or 0.0)
    if w.traffic.concurrent_users is not None:
        return "users", share * w.traffic.concurrent_users
    return "rate", share * float(w.traffic.peak_requests_per_s or 0.0)


def class_workload(w: WorkloadSpec, c: RequestClass) -> WorkloadSpec:
    """The workload of one class alone: its lengths, its targets and its part of the load (a class of a
    closed-loop stack keeps at least one concurrent request)."""
    kind, load = class_load(w, c)
    traffic: dict[str, float | int] = {"peak_requests_per_s": max(load, 1e-6)}
    if kind == "users":
        # each active request's output rate: the stack's, else what the class's own targets imply, else
        # what the mix's imply (a class with only a TTFT target in a closed loop)
        per_token = c.slo.per_token_ms()
        e2e = [v for m, _, v in c.slo.targets() if m == "e2e"]
        tps = (w.traffic.tokens_per_s_per_user or (1000.0 / per_token if per_token else None)
               or (c.output_tokens.mean * 1000.0 / min(e2e) if e2e else None) or w.tokens_per_s_per_user)
        traffic = {"concurrent_users": max(1, round(load)), **({"tokens_per_s_per_user": tps} if tps else {})}
    data = w.model_dump(exclude_unset=True, exclude={"classes", "traffic", "slo", "prompt_tokens", "output_tokens"})
    data.update(prompt_tokens=c.prompt_tokens.model_dump(exclude_none=True),
                output_tokens=c.output_tokens.model_dump(exclude_none=True),
                slo=c.slo.model_dump(exclude_none=True), traffic=traffic)
    return type(w).model_validate(data)


def tightest_class(classes: list[RequestClass], metric: str) -> str | None:
    """The name of the interactive class that sets the tightest target on `metric` (ttft | itl | tpot | e2e, at
    any percentile), the class behind the stack's derived target line (sizing.spec._tightest_slo); None when
    no class sets one."""
    tight = [(v, c.name) for c in classes if not c.is_batch for m, _, v in c.slo.targets() if m == metric]
    return min(tight)[1] if tight else None


def class_load_tokens(w: WorkloadSpec, c: RequestClass) -> float:
    """A class's output demand, tokens/s (a closed-loop class: its concurrent requests as the weight)."""
    return class_load(w, c)[1] * float(c.output_tokens.mean)


def class_weights(w: WorkloadSpec) -> list[float]:
    """Each interactive class's share of the mix's requests (fractions summing to 1)."""
    loads = [class_load(w, c)[1] for c in interactive_classes(w)]
    total = sum(loads) or 1.0
    return [x / total for x in loads]


def mix_goodput(parts: list[tuple[Goodput, float, float]]) -> Goodput:
    """The mix's goodput per replica from each class's own: `parts` = (goodput alone, share of the
    requests, mean output tokens). Requests/s = 1 / Σ f/r; output tokens/s = that × Σ f·out; concurrency:
    each class's own in-flight count scaled by the time the replica spends on it (Little's law). The
    estimate carried is the class that takes the most of a replica's time (it binds the mix first)."""
    per_req_s = sum(f / max(g.requests_per_s, 1e-12) for g, f, _ in parts)
    rps = 1.0 / per_req_s if per_req_s > 0 else 0.0
    out_mean = sum(f * o for _, f, o in parts)
    conc = sum(g.concurrency * (rps * f / max(g.requests_per_s, 1e-12)) for g, f, _ in parts)
    binding = max(parts, key=lambda t: t[1] / max(t[0].requests_per_s, 1e-12))[0]
    tokens = rps * out_mean
    ratio = tokens / max(sum(g.output_tokens_per_s * f for g, f, _ in parts), 1e-12)
    return replace(binding, feasible=True, output_tokens_per_s=tokens, requests_per_s=rps, concurrency=conc,
                   reason="", reason_code="",
                   output_tokens_per_s_p10=sum(g.output_tokens_per_s_p10 * f for g, f, _ in parts) * ratio,
                   output_tokens_per_s_p90=sum(g.output_tokens_per_s_p90 * f for g, f, _ in parts) * ratio)


def class_goodput(cat: Catalog, cfg: ReplicaConfig, wc: WorkloadSpec, mode: str,
                  goodput_fn: Callable[..., Goodput]) -> Goodput:
    """One class's goodput per replica alone (`wc`: its class_workload), at its own targets; `goodput_fn`:
    sizing.perf.goodput.goodput or a memoised wrapper of it (handed in: the import chain stays flat)."""
    from sizing.perf.load import WorkloadShape

    return goodput_fn(cat, cfg, WorkloadShape.from_spec(wc), wc.slo.bound_ms("ttft", "p95"),
                      wc.slo.bound_ms("itl", "p95"), mode=mode, targets=wc.slo.targets())


def class_requests_per_s(w: WorkloadSpec, c: RequestClass) -> float:
    """A class's arrival rate, requests/s: its own or its share of the stack's rate; in a closed loop, its
    concurrent requests × the output rate each gets ÷ its mean output (a request lasts output ÷ rate
    seconds, so each active user starts that many per second), the rate the replay's arrivals need."""
    kind, load = class_load(w, c)
    if kind == "rate":
        return load
    tps = class_workload(w, c).tokens_per_s_per_user or 0.0
    return load * tps / max(float(c.output_tokens.mean), 1.0)
