"""One strategy's search: every candidate it allows, sized by the performance model, the feasible ones
ranked by cost (USD per hour for the whole fleet, then GPUs, then goodput), the rest with reasons."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.plan import Rejection
from sizing.planning.candidates import Evaluated, enumerate_candidates, evaluate

if TYPE_CHECKING:
    from sizing.planning.problem import PlanningProblem

STRATEGIES = ("auto", "scale-up", "scale-out", "mixed")
GoodputScale = Callable[[str, str, str], "tuple[float, str] | None"]


@dataclass
class Search:
    """All candidates of one strategy: the feasible ones sized, the rest with reasons."""

    strategy: str
    feasible: list[Evaluated]
    rejections: list[Rejection]

    @property
    def best(self) -> Evaluated | None:
        return min(self.feasible, key=cost_key) if self.feasible else None


def cost_key(e: Evaluated) -> tuple[float, int, float]:
    return (round(e.usd_per_hour, 6), e.gpus, -e.gp.output_tokens_per_s)


def search(p: PlanningProblem, strategy: str, scale: GoodputScale | None = None) -> Search:
    """Evaluate every candidate allowed by `strategy` (mixed searches everything); `scale`: the user's
    measured goodput scale per (GPU, engine, model), from the calibration overlay."""
    rejections: list[Rejection] = []
    feasible: list[Evaluated] = []
    enum_strategy = "auto" if strategy == "mixed" else strategy
    for cand in enumerate_candidates(p, enum_strategy, rejections):
        s = scale(cand.instance.gpu, p.workload.engine, p.model.hf_id) if scale else None
        e = evaluate(p, p.purchase, cand, rejections, s[0] if s else 1.0)
        if e is not None:
            feasible.append(e)
    return Search(strategy, feasible, rejections)
