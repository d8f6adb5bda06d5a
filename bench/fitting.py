"""The fit shared by bench/calibrate.py and bench/accuracy.py: bounded, prior-regularised robust
least squares (scipy) on log(predicted / measured) over the calibration rows.

Each (publisher group, metric group) counts equally: the rows of one group (bench/source_groups.csv:
the pages of one lab and harness, NVIDIA's docs, one blog, ...) share one unit of weight per metric
group, whatever their number of sources or rows. The publisher group is the unit of evidence of the
validation (bench/accuracy.py leaves one out at a time) and of the issue: pages of one lab run with
one harness are not independent evidence, so weighing each page as its own source let GPUStack's ~20
pages count ~20x dstack's or SGLang's in every fit, and a held-out refit was mostly GPUStack's.
Within a (group, metric group) every row weighs the same (a source with 525 rows counts 525x one with
1 inside its group). Each constant is pulled towards its prior by log(value / prior) / sigma, so a constant no
remaining row pins (a source held out) falls back to its prior instead of drifting. Rows of one
scenario share one estimate, so one evaluation of all 2,133 rows costs ~700 estimates.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.calib_rows import CalRow, estimate, metric_group, predict_from, scenario_key  # noqa: E402
from bench.source_groups import group_key  # noqa: E402
from sizing.catalog.calibration import (  # noqa: E402
    FITTED,  # noqa: E402
    PARAMS,
    calibration_from_dict,
    override_calibration,
)
from sizing.catalog.lookup import Catalog  # noqa: E402
from sizing.perf import load as perf  # noqa: E402

NAMES = list(FITTED)  # constants with ParamSpec.fixed stay at their priors (Calibration.v)
# soft-L1 knee on each row's log(pred / meas): the 18 % TTFT / ITL target read as a log
# residual. Rows within it count as least squares, rows further off as |r| (robust), whatever the
# size of their (group, metric group) cell. Before 2026-12-03 scipy's f_scale 0.05 acted on the
# *weighted* residual, so the knee sat at |r| = 0.05 * sqrt(n_cell * n_cells): per source, 1.3 for 9 rows
# to 10 for 525 (clipped at 3: never reached), i.e. plain least squares; per group it would have been
# 0.7 for SGLang's 8-row cells and 7-8 for GPUStack's ~1,000-row ones.
ROW_SCALE = 0.18
# the prior penalty of all constants together weighs as much as PRIOR_CELLS (group, metric group)
# cells of rows (the data's squared weights sum to 1, 1 / n_cells per cell). 1.76 = the strength the
# fit had before 2026-12-03, 0.15**2 of the data over its 78 (source, metric group) cells, kept in the
# unit of evidence: a fixed 0.15**2 over 24 group cells would have cut the prior to 0.54 of a cell.
PRIOR_CELLS = 0.15 ** 2 * 78


def use(values: dict[str, float]) -> None:
    override_calibration(calibration_from_dict({"parameters": values}))
    perf.clear_caches()


def predictions(catalog: Catalog, rows: list[CalRow], values: dict[str, float]) -> np.ndarray:
    use(values)
    cache: dict[tuple[object, ...], object] = {}
    out = np.empty(len(rows))
    for i, r in enumerate(rows):
        k = scenario_key(r)
        e = cache.get(k)
        if e is None:
            e = cache[k] = estimate(catalog, r)
        out[i] = predict_from(r, e)  # type: ignore[arg-type]
    return out


def _weights(rows: list[CalRow]) -> np.ndarray:
    """Per row 1 / sqrt(n_cell * n_cells), a cell being one (publisher group, metric group): the
    squared weights of each cell sum to 1 / n_cells, of all rows to 1."""
    key = group_key()
    cells = [(key(r), metric_group(r.metric)) for r in rows]
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for c in cells:
        counts[c] += 1
    return np.array([1.0 / math.sqrt(counts[c] * len(counts)) for c in cells])


def prior_weight(rows: list[CalRow]) -> float:
    """Weight of the prior residuals: their squares sum to PRIOR_CELLS cells' worth of the data."""
    key = group_key()
    return math.sqrt(PRIOR_CELLS / len({(key(r), metric_group(r.metric)) for r in rows}))


def soft_l1(r: np.ndarray, scale: float) -> np.ndarray:
    """Signed residuals whose squares are the soft-L1 loss of log residuals `r` at knee `scale`:
    f**2 / 2 = scale**2 * (sqrt(1 + (r / scale)**2) - 1), about r**2 / 2 below the knee and scale * |r|
    far above it. Applied row by row before the row's weight, so the knee is the same log error in
    every (group, metric group) cell."""
    return np.sign(r) * scale * np.sqrt(2.0 * (np.sqrt(1.0 + (r / scale) ** 2) - 1.0))


def fit(catalog: Catalog, rows: list[CalRow], max_nfev: int = 400) -> tuple[dict[str, float], float]:
    """Fitted values (name -> value) and the final cost. Starts from the priors."""
    meas = np.log(np.array([r.value for r in rows]))
    w = _weights(rows)
    pw = prior_weight(rows)
    prior = np.log([PARAMS[n].prior for n in NAMES])
    sig = np.array([PARAMS[n].sigma for n in NAMES])
    lo = np.log([PARAMS[n].lo for n in NAMES])
    hi = np.log([PARAMS[n].hi for n in NAMES])

    def resid(x: np.ndarray) -> np.ndarray:
        vals = dict(zip(NAMES, np.exp(x), strict=True))
        pred = np.log(np.maximum(predictions(catalog, rows, vals), 1e-9))
        return np.concatenate([w * soft_l1(np.clip(pred - meas, -3, 3), ROW_SCALE),
                               pw * (x - prior) / sig / math.sqrt(len(x))])

    # the robust loss is already in the row residuals (soft_l1); the prior is Gaussian (least squares)
    res = least_squares(resid, prior, bounds=(lo, hi), loss="linear", x_scale=1.0,
                        diff_step=1e-3, max_nfev=max_nfev, xtol=1e-4, ftol=1e-5)
    vals = dict(zip(NAMES, (float(v) for v in np.exp(res.x)), strict=True))
    return vals, float(res.cost)


def pinned_by(catalog: Catalog, rows: list[CalRow], values: dict[str, float]) -> dict[str, list[str]]:
    """For each constant, the sources whose predictions move most when it moves (+10 %): the rows
    that pin it. Sources that move by < 0.5 % are left out."""
    base = predictions(catalog, rows, values)
    out: dict[str, list[str]] = {}
    for n in NAMES:
        bumped = dict(values)
        bumped[n] = values[n] * 1.1
        d = np.abs(np.log(predictions(catalog, rows, bumped) / base))
        per: dict[str, list[float]] = defaultdict(list)
        for r, x in zip(rows, d, strict=True):
            per[r.source].append(float(x))
        moved = sorted(((statistics.fmean(v), s) for s, v in per.items() if statistics.fmean(v) > 0.005), reverse=True)
        out[n] = [f"{s} ({m:.1%})" for m, s in moved[:4]]
    use(values)
    return out
