"""Requests shaped like the stack's workload, and the load a bench run applies by default.

Token lengths: a log-normal with the spec's mean and p95 (a constant when no p95 is given),
clamped to [1, 3 × p95]. Prompts are built from common English words that are one token (with their
leading space) in the Llama-3, Mistral, Qwen and GPT tokenizers, so the word count approximates the
prompt tokens without downloading a tokenizer; the chat template and BOS add a few. When the server
returns `usage.prompt_tokens`, the results use that count instead and say so. Words are drawn at
random per request so the prefix cache only helps as much as `prefix_cache_hit_rate` says: that share
of each prompt is a prefix shared by all requests.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.errors import SpecError

if TYPE_CHECKING:
    from sizing.spec import TokenLength, WorkloadSpec

# Very common English words, chosen because BPE vocabularies (GPT-2/cl100k-style, Llama-3, Mistral)
# hold each, with its leading space, as one token. Not checked against every tokenizer here: when the
# server returns usage.prompt_tokens the results use that count instead.
WORDS = (
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at", "from", "this", "it",
    "be", "are", "have", "or", "not", "one", "all", "new", "more", "time", "year", "people", "way", "day", "man",
    "work", "life", "world", "school", "state", "family", "student", "group", "country", "problem", "hand", "part",
    "place", "case", "week", "company", "system", "program", "question", "government", "number", "night", "point",
    "home", "water", "room", "mother", "area", "money", "story", "fact", "month", "lot", "right", "study", "book",
    "eye", "job", "word",
)

Z95 = 1.6448536269514722  # standard normal 95th percentile
SWEEP_FACTORS = (0.5, 1.0, 1.5)  # the planned load and points either side


@dataclass(frozen=True)
class LengthSampler:
    """Draws token counts with a given mean and 95th percentile (log-normal)."""

    mean: int
    p95: int
    sigma: float
    mu: float

    @classmethod
    def of(cls, t: TokenLength) -> LengthSampler:
        p95 = t.p95_or_mean
        ratio = p95 / t.mean
        # log-normal: mean = exp(mu + s²/2), p95 = exp(mu + z·s) => s²/2 - z·s + ln(p95/mean) = 0
        disc = Z95 * Z95 - 2.0 * math.log(ratio)
        sigma = Z95 - math.sqrt(disc) if disc > 0 else Z95
        mu = math.log(t.mean) - sigma * sigma / 2.0
        return cls(mean=t.mean, p95=p95, sigma=sigma, mu=mu)

    def draw(self, rng: random.Random) -> int:
        if self.sigma == 0.0:
            return self.mean
        n = int(round(math.exp(rng.gauss(self.mu, self.sigma))))
        return max(1, min(n, 3 * self.p95))


@dataclass(frozen=True)
class RequestShape:
    prompt: str
    prompt_tokens: int  # target (word count)
    max_tokens: int


class RequestFactory:
    """Builds prompts and max_tokens from the workload spec, reproducibly from a seed."""

    def __init__(self, workload: WorkloadSpec, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.prompt_len = LengthSampler.of(workload.prompt_tokens)
        self.output_len = LengthSampler.of(workload.output_tokens)
        shared = int(workload.prompt_tokens.mean * workload.prefix_cache_hit_rate)
        self.shared_prefix = self._words(random.Random(seed + 1), shared)
        self.shared_tokens = shared

    def _words(self, rng: random.Random, n: int) -> list[str]:
        return [rng.choice(WORDS) for _ in range(n)]

    def next(self) -> RequestShape:
        n_in = self.prompt_len.draw(self.rng)
        n_out = self.output_len.draw(self.rng)
        shared = min(self.shared_tokens, n_in)
        words = self.shared_prefix[:shared] + self._words(self.rng, n_in - shared)
        return RequestShape(prompt=" " + " ".join(words), prompt_tokens=n_in, max_tokens=n_out)


@dataclass(frozen=True)
class LoadPoint:
    mode: str  # concurrency | rate
    load: float
    planned: bool


def planned_load(workload: WorkloadSpec) -> LoadPoint:
    """The load the plan is sized for: the stack's concurrent users (closed loop) or peak rate (open
    loop). This is the plan's per-replica planned load × replicas for demand, stated in the spec's terms."""
    t = workload.traffic
    if t.concurrent_users is not None:
        return LoadPoint("concurrency", float(t.concurrent_users), True)
    assert t.peak_requests_per_s is not None  # the spec validates exactly one of the two
    return LoadPoint("rate", float(t.peak_requests_per_s), True)


def load_points(workload: WorkloadSpec, concurrency: list[int] | None, rate: list[float] | None,
                sweep: bool, demand_share: float = 1.0) -> list[LoadPoint]:
    """Explicit loads when given, else the planned load × demand_share and, with sweep, points either side."""
    if concurrency and rate:
        raise SpecError("give --concurrency or --rate, not both")
    if concurrency:
        if any(c < 1 for c in concurrency):
            raise SpecError("--concurrency: must be at least 1")
        return [LoadPoint("concurrency", float(c), False) for c in concurrency]
    if rate:
        if any(not (r > 0 and math.isfinite(r)) for r in rate):
            raise SpecError("--rate: must be a positive number of requests/s")
        return [LoadPoint("rate", float(r), False) for r in rate]
    if not 0 < demand_share <= 1:
        raise SpecError(f"--demand-share: must be in (0, 1] (got {demand_share})")
    base = planned_load(workload)
    factors = SWEEP_FACTORS if sweep else (1.0,)
    points: list[LoadPoint] = []
    for f in factors:
        v = base.load * demand_share * f
        v = max(1.0, float(round(v))) if base.mode == "concurrency" else v
        if all(p.load != v for p in points):
            points.append(LoadPoint(base.mode, v, f == 1.0))
    return points
