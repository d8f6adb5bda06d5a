"""The fit's weights (bench/fitting.py): each (publisher group, metric group) weighs equally, the
validation's unit of evidence (issue 31), whatever the number of sources or rows the group holds."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest

from bench.fitting import _weights


def _rows(spec: list[tuple[str, str, int]]) -> list[SimpleNamespace]:
    return [SimpleNamespace(source=s, metric=m) for s, m, n in spec for _ in range(n)]


def test_each_publisher_group_and_metric_weighs_the_same_however_many_pages() -> None:
    # two GPUStack pages (one lab, one harness) against SGLang's one run
    rows = _rows([("gpsoss20a", "output_tok_s_total", 3), ("gpsq235a", "output_tok_s_total", 1),
                  ("sgl060", "output_tok_s_total", 2), ("sgl060", "ttft_ms", 5)])
    w = _weights(rows)  # type: ignore[arg-type]
    total: dict[tuple[str, str], float] = defaultdict(float)
    for r, x in zip(rows, w, strict=True):
        total[("sglang" if r.source == "sgl060" else "gpustack", r.metric)] += float(x) ** 2
    assert total[("gpustack", "output_tok_s_total")] == pytest.approx(total[("sglang", "output_tok_s_total")])
    assert total[("sglang", "ttft_ms")] == pytest.approx(total[("sglang", "output_tok_s_total")])
    assert sum(total.values()) == pytest.approx(1.0)
    # the pages of one group share its weight row by row
    assert w[0] == pytest.approx(w[3])


def test_a_source_without_a_group_is_refused_in_one_line() -> None:
    with pytest.raises(SystemExit, match="no group in source_groups.csv"):
        _weights(_rows([("nosuchsrc", "ttft_ms", 1)]))  # type: ignore[arg-type]


def test_the_robust_knee_is_one_log_error_in_every_cell() -> None:
    """The soft-L1 acts on each row's log residual before its weight: a row 2.7x off is down-weighted
    alike in SGLang's 8-row cell and in GPUStack's ~1,000-row one (scipy's f_scale on the weighted
    residual put the knee at 0.05 * sqrt(n_cell * n_cells): 0.7 for 8 rows, never for 1,000)."""
    import numpy as np

    from bench.fitting import ROW_SCALE, soft_l1

    r = np.array([1e-3, ROW_SCALE, 1.0, -1.0, 3.0])
    f = soft_l1(r, ROW_SCALE)
    assert f[0] == pytest.approx(r[0], rel=1e-3)  # least squares below the knee
    assert np.all(np.sign(f) == np.sign(r)) and np.all(np.diff(np.abs(f[[0, 1, 2, 4]])) > 0)
    loss = f ** 2 / 2  # the soft-L1 loss itself
    assert loss == pytest.approx(ROW_SCALE ** 2 * (np.sqrt(1 + (r / ROW_SCALE) ** 2) - 1))
    assert loss[4] / loss[2] == pytest.approx(3.0, rel=0.2)  # linear far above the knee, not 9x
    assert 0.1 <= ROW_SCALE <= 0.3  # the latency target's order, not tuned


def test_the_prior_weighs_a_fixed_number_of_cells_of_evidence() -> None:
    """The prior's strength is stated in (group, metric group) cells, so grouping the rows (fewer,
    heavier cells) does not silently weaken it: its squared weight is PRIOR_CELLS / n_cells."""
    from bench.fitting import PRIOR_CELLS, prior_weight

    few = _rows([("sgl060", "ttft_ms", 3), ("gpsoss20a", "ttft_ms", 5)])
    many = few + _rows([("sgl060", "itl_ms", 2), ("nim", "itl_ms", 2), ("r2rz", "itl_ms", 1)])
    assert prior_weight(few) ** 2 * 2 == pytest.approx(PRIOR_CELLS)  # type: ignore[arg-type]
    assert prior_weight(many) ** 2 * 5 == pytest.approx(PRIOR_CELLS)  # type: ignore[arg-type]
    assert 1.0 <= PRIOR_CELLS <= 3.0  # 0.15**2 x 78: the strength of the fit before group weights
