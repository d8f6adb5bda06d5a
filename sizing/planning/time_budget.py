"""The planner's time budget: a limit on one plan's search, in seconds of this process's CPU time (from the
first check; CPU, not wall, time so that a loaded machine does not change a plan: sizing.spec
DEFAULT_SEARCH_BUDGET_S has the reason).

Every step of the search that can take long asks `expired()` before it starts (the candidate loop, the
finalists' batching tuning, the step simulation every step, the replay, the other strategies, the
infeasible suggestions); once the budget is spent the steps not started are skipped and said so in
`cut`, and the plan answers with the best feasible fleet found so far (or a clear infeasible). The clock
is injectable so that tests are deterministic (no sleeps): pass any `() -> seconds` function.

The budget is the stack's `llmcap:hardware.search_budget_s` (default DEFAULT_SEARCH_BUDGET_S), or
`--search-budget` on the command line."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sizing.spec import DEFAULT_SEARCH_BUDGET_S  # the default and its reason live with the spec field


@dataclass
class TimeBudget:
    """`seconds` from the first `expired()` check (or from `start()`); `clock` returns seconds (this process's
    CPU time, time.process_time, by default). `cut` holds one phrase per step skipped for lack of time."""

    seconds: float = DEFAULT_SEARCH_BUDGET_S
    clock: Callable[[], float] = time.process_time
    cut: list[str] = field(default_factory=list)
    _t0: float | None = None

    def start(self) -> TimeBudget:
        if self._t0 is None:
            self._t0 = self.clock()
        return self

    def expired(self) -> bool:
        self.start()
        assert self._t0 is not None
        return self.clock() - self._t0 >= self.seconds

    def skipped(self, what: str) -> None:
        """Record one step not tried (once per phrase)."""
        if what not in self.cut:
            self.cut.append(what)

    def note(self) -> str | None:
        """The one line a plan carries when the budget cut its search, None when nothing was skipped."""
        if not self.cut:
            return None
        return (f"search cut at {self.seconds:g} s (hardware.search_budget_s / --search-budget): not tried: "
                f"{'; '.join(self.cut)}; the plan is the best feasible fleet found before the cut")


def unlimited() -> TimeBudget:
    """A deadline that never expires (sweeps and internal re-plans that have their own bounds)."""
    return TimeBudget(seconds=float("inf"))
