"""One planning problem: what every step of the search needs, in one value instead of the same eight
arguments through every signature (search, candidates, tuning, the infeasible explanation)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from sizing.planning.demand import Demand, demand_of
from sizing.planning.time_budget import TimeBudget, unlimited

if TYPE_CHECKING:
    from sizing.catalog.lookup import Catalog
    from sizing.catalog.records import ModelArch
    from sizing.spec import HardwareSpec, WorkloadSpec


@dataclass(frozen=True)
class PlanningProblem:
    """The catalog, the resolved model, the stack's workload and hardware specs, the region, and the
    demand the workload implies (whole fleet: output tokens/s, or requests/s; sizing.planning.demand)."""

    catalog: Catalog
    model: ModelArch
    workload: WorkloadSpec
    hardware: HardwareSpec
    region: str
    demand: Demand
    # the time budget of the plan's search (sizing.planning.time_budget); shared by every re-plan of this problem
    time_budget: TimeBudget = field(default_factory=unlimited, compare=False)

    @classmethod
    def of(cls, catalog: Catalog, model: ModelArch, workload: WorkloadSpec, hardware: HardwareSpec,
           region: str) -> PlanningProblem:
        return cls(catalog, model, workload, hardware, region, demand_of(workload))

    def with_specs(self, workload: WorkloadSpec | None = None, hardware: HardwareSpec | None = None) -> PlanningProblem:
        """The same problem with a changed spec; the demand follows the workload (tokens/s per user
        defaults to 1000 / ITL, so a relaxed ITL target also changes the demand)."""
        w = workload or self.workload
        return replace(self, workload=w, hardware=hardware or self.hardware, demand=demand_of(w))

    @property
    def purchase(self) -> str:
        """The price the candidates are ranked at: spot for a spot stack, else on-demand (mixed purchase
        splits a plan after the search, sizing.planning.purchase)."""
        return "spot" if self.hardware.purchase == "spot" else "on-demand"
