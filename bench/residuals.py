"""Per-row residuals of the bundled calibration for chosen sources: predicted vs measured.

Usage: python bench/residuals.py SOURCE [SOURCE ...] [--metric ttft] [--held-out] [--values FILE]
--held-out refits without each named source first (honest residuals, one fit per source);
--values takes the constants from a JSON object {name: value} instead of the bundled file.
Rows are printed grouped by scenario (config, shape, mode, load) so the structure shows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.calib_rows import load_rows, metric_group, predict, scenario_key  # noqa: E402
from bench.fitting import fit, predictions  # noqa: E402
from sizing.catalog.lookup import load_catalog  # noqa: E402


def main(argv: list[str]) -> int:
    srcs = [a for a in argv if not a.startswith("--")]
    metric = argv[argv.index("--metric") + 1] if "--metric" in argv else None
    values_file = argv[argv.index("--values") + 1] if "--values" in argv else None
    for x in (metric, values_file):
        if x:
            srcs.remove(x)
    catalog = load_catalog()
    rows = load_rows(catalog)
    for s in srcs:
        test = [r for r in rows if r.source == s and (metric is None or metric_group(r.metric) == metric)]
        if "--held-out" in argv:
            values, _ = fit(catalog, [r for r in rows if r.source != s])
            pred = list(predictions(catalog, test, values))
        elif values_file:
            pred = list(predictions(catalog, test, json.loads(Path(values_file).read_text())))
        else:
            pred = [predict(catalog, r) for r in test]
        test_p = sorted(zip(test, pred, strict=True), key=lambda rp: (str(scenario_key(rp[0])), rp[0].metric))
        for r, p in test_p:
            c = r.cfg
            print(f"{r.id:22} {c.model.short_name[:14]:14} {c.gpu:9} {c.precision:9} tp{c.tp} {c.engine:6} {r.mode:6} "
                  f"L={r.load:6.0f} isl={r.shape.prompt_tokens:5.0f} osl={r.shape.output_tokens:5.0f} "
                  f"{r.metric:18} {r.stat:4} meas {r.value:9.1f} pred {p:9.1f} ratio {p / r.value:5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
