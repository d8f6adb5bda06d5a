"""The deployability rules of issue 14 (placement, allocatable, storage, served model, AZs, API key).

Each rule is a function of a FitContext registered with `@fit_rule`; see infra/fit.py."""

from __future__ import annotations
