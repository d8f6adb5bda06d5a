"""Demand: how much serving capacity a workload asks for.

Two forms, both documented in the README:
- `concurrent_users` U: U requests are *active* at peak (in prefill or decode). Each expects
  `tokens_per_s_per_user` output tokens/s (default what the SLO implies: 1000 / the tightest ITL or
  TPOT target, or output tokens / the E2E target), so the output demand is
  U × tokens/s per user. A replica serves at most the concurrency at which it still meets the
  SLO, so replicas ≥ U ÷ that concurrency as well as ≥ demand tokens/s ÷ goodput tokens/s.
- `peak_requests_per_s` R: Poisson arrivals; output demand is R × mean output tokens;
  replicas ≥ R × output tokens ÷ goodput tokens/s per replica (the open-loop goodput).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from sizing.humanize import num

if TYPE_CHECKING:
    from sizing.spec import WorkloadSpec


@dataclass(frozen=True)
class Demand:
    mode: str  # "closed" (concurrent users) or "open" (request rate)
    concurrent_users: int | None
    requests_per_s: float | None  # open loop: the given peak; closed loop: None until a plan's e2e is known
    tokens_per_s_per_user: float | None  # None: open loop with an SLO that implies no per-user rate
    output_tokens_per_s: float  # total output demand
    prompt_tokens_mean: float
    output_tokens_mean: float
    formula: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def demand_of(w: WorkloadSpec) -> Demand:
    tps = w.tokens_per_s_per_user
    if w.traffic.concurrent_users is not None:
        u = w.traffic.concurrent_users
        assert tps is not None  # WorkloadSpec._rate_known: closed loop always has a rate
        return Demand("closed", u, None, tps, u * tps, w.prompt_tokens.mean, w.output_tokens.mean,
                      f"{u:,} concurrent users × {num(tps)} tokens/s per user = {u * tps:,.0f} output tokens/s")
    r = float(w.traffic.peak_requests_per_s or 0.0)
    out = r * w.output_tokens.mean
    return Demand("open", None, r, tps, out, w.prompt_tokens.mean, w.output_tokens.mean,
                  f"{num(r)} requests/s × {w.output_tokens.mean:,} output tokens = {out:,.0f} output tokens/s")
