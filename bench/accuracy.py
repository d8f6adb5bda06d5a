"""Out-of-sample accuracy of the performance model on all three calibration files, sources grouped
by publisher and harness (bench/source_groups.csv: the GPUStack lab's pages are one group, NVIDIA's
docs one, each blog one, ...).

Prints FIRST the leave-one-group-out error (refit the constants without a group, predict that
group's rows) per group and the median of per-group medians, for throughput, TTFT, ITL/TPOT and
E2E at each statistic the rows give (mean, median, p95, p99); then the same per regime (low load,
near capacity, burst, long prompts >= 4k, MoE on several GPUs); then the in-sample error of the
bundled calibration (sizing/data/perf_calibration.json), per group.

Usage: python bench/accuracy.py [CSV ...] [--quick] [--jobs N] [--by-source] [--gpu] [--rows]
       [--in-sample-only] [--json FILE]
--quick refits with at most 40 evaluations (iteration, not the headline); --jobs runs N refits at
once (at most 2 on a shared machine); --by-source adds the old leave-one-source-out table and --gpu
the leave-one-GPU-out one; --json writes every held-out row's prediction.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.calib_rows import CalRow, load_rows, metric_group, predict  # noqa: E402
from bench.fitting import fit, predictions  # noqa: E402
from bench.source_groups import GROUPS_FILE, group_key, source_groups  # noqa: E402,F401
from sizing.catalog.calibration import override_calibration  # noqa: E402
from sizing.catalog.lookup import Catalog, load_catalog  # noqa: E402

GROUPS = ("throughput", "ttft", "itl", "e2e")
STATS = ("mean", "p50", "p95", "p99")
TARGETS = {"throughput": 0.12, "ttft": 0.18, "itl": 0.18}
LONG_PROMPT = 4096  # tokens: the "long prompts" regime
LOW_CONCURRENCY = 8  # closed loop at or below: "low load"
LOW_RATE = 2.0  # requests/s, Poisson at or below: "low load"; above: "near capacity"
HIGH_CONCURRENCY = 64  # closed loop at or above: "near capacity"

Err = list[tuple[CalRow, float, float]]  # (row, prediction, |pred - meas| / meas)


def regimes(r: CalRow) -> list[str]:
    """The regimes a row belongs to (a row may be in several; definitions in the module constants)."""
    out = []
    # a burst held to a small cap in flight (r.requests > r.load: vllm bench serve --max-concurrency 4
    # --num-prompts 100) is a closed loop at that cap after its first wave
    small_cap = r.mode == "burst" and r.requests > 0 and r.load <= LOW_CONCURRENCY
    if r.mode in ("burst", "offline") and not small_cap:
        out.append("burst")
    elif (r.mode == "closed" and r.load <= LOW_CONCURRENCY) or (r.mode == "open" and r.load <= LOW_RATE) \
            or small_cap:
        out.append("low load")
    elif (r.mode == "closed" and r.load >= HIGH_CONCURRENCY) or (r.mode == "open" and r.load > LOW_RATE):
        out.append("near capacity")
    if r.shape.prompt_tokens >= LONG_PROMPT:
        out.append("long prompts")
    if r.cfg.model.is_moe and r.cfg.tp * r.cfg.pp > 1:
        out.append("MoE multi-GPU")
    return out


def row_errors(catalog: Catalog, rows: list[CalRow]) -> Err:
    """(row, prediction, absolute percentage error as a fraction) with the bundled calibration."""
    out = []
    for r in rows:
        p = predict(catalog, r)
        out.append((r, p, abs(p - r.value) / r.value))
    return out


def summarize(errs: Err, key: Callable[[CalRow], str] = lambda r: r.source) -> dict[str, dict[str, float]]:
    """{group: {metric group: median APE}} plus "overall" (median of per-group medians). Keys
    "metric/stat" hold the same per statistic."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r, _, e in errs:
        g = metric_group(r.metric)
        acc[key(r)][g].append(e)
        acc[key(r)][f"{g}/{r.stat}"].append(e)
    out = {s: {g: statistics.median(v) for g, v in gs.items()} for s, gs in acc.items()}
    cells = sorted({g for gs in out.values() for g in gs})
    out["overall"] = {g: statistics.median([out[s][g] for s in acc if g in out[s]]) for g in cells}
    return out


def _refit_one(args: tuple[Catalog, list[CalRow], list[CalRow], int]) -> list[float]:
    catalog, train, test, nfev = args
    values, _ = fit(catalog, train, max_nfev=nfev)
    return [float(p) for p in predictions(catalog, test, values)]


def held_out(catalog: Catalog, rows: list[CalRow], key: Callable[[CalRow], str], log: bool = True,
             jobs: int = 1, max_nfev: int = 400) -> Err:
    """Refit without each group of rows (by `key`) and predict that group: every row's held-out error.
    `jobs` > 1 runs that many refits at once (forked processes)."""
    names = sorted({key(r) for r in rows})
    work = [(catalog, [r for r in rows if key(r) != g], [r for r in rows if key(r) == g], max_nfev) for g in names]
    t0 = time.time()
    if jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(min(jobs, 2)) as pool:
            preds = pool.map(_refit_one, work, chunksize=1)
    else:
        preds = []
        for g, w in zip(names, work, strict=True):
            t = time.time()
            preds.append(_refit_one(w))
            if log:
                print(f"  refit without {g:12} ({len(w[1])} rows) and predicted its {len(w[2])}: "
                      f"{time.time() - t:.0f} s", file=sys.stderr)
    if log:
        print(f"  {len(names)} refits: {time.time() - t0:.0f} s wall", file=sys.stderr)
    out: Err = []
    for w, pred in zip(work, preds, strict=True):
        out += [(r, p, abs(p - r.value) / r.value) for r, p in zip(w[2], pred, strict=True)]
    override_calibration(None)
    return out


def _counts(errs: Err, key: Callable[[CalRow], str]) -> dict[str, dict[str, int]]:
    c: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r, _, _ in errs:
        c[key(r)][metric_group(r.metric)] += 1
    return c


def print_table(title: str, errs: Err, key: Callable[[CalRow], str] = lambda r: r.source) -> dict[str, float]:
    summ, counts = summarize(errs, key), _counts(errs, key)
    print(title)
    print(f"{'':14}" + "".join(f"{g:>17}" for g in GROUPS))
    for s in sorted(k for k in summ if k != "overall"):
        cells = [f"{summ[s][g]:6.1%} (n={counts[s][g]:4})" if g in summ[s] else "" for g in GROUPS]
        print(f"{s:14}" + "".join(f"{c:>17}" for c in cells))
    o = summ["overall"]
    print(f"{'median':14}" + "".join(f"{o[g]:>17.1%}" if g in o else f"{'':>17}" for g in GROUPS))
    print("  by statistic (median of per-group medians): " + "; ".join(
        f"{g} " + ", ".join(f"{st} {o[f'{g}/{st}']:.1%}" for st in STATS if f"{g}/{st}" in o) for g in GROUPS))
    return o


def print_regimes(title: str, errs: Err, key: Callable[[CalRow], str]) -> dict[str, dict[str, float]]:
    """Per regime, the median of per-group medians (and the rows and groups behind it)."""
    print(title)
    print(f"{'':14}" + "".join(f"{g:>22}" for g in GROUPS))
    out = {}
    for reg in ("low load", "near capacity", "burst", "long prompts", "MoE multi-GPU"):
        sub = [e for e in errs if reg in regimes(e[0])]
        if not sub:
            continue
        summ, counts = summarize(sub, key), _counts(sub, key)
        o = summ["overall"]
        out[reg] = {g: o[g] for g in GROUPS if g in o}
        cells = []
        for g in GROUPS:
            n = sum(c.get(g, 0) for c in counts.values())
            k = sum(1 for c in counts.values() if c.get(g, 0))
            cells.append(f"{o[g]:6.1%} (n={n:4}, g={k})" if g in o else "")
        print(f"{reg:14}" + "".join(f"{c:>22}" for c in cells))
    print(f"  regimes: burst = all prompts at once (finite burst or offline); low load = closed loop <= "
          f"{LOW_CONCURRENCY} in flight or Poisson <= {LOW_RATE:g} req/s; near capacity = closed loop >= "
          f"{HIGH_CONCURRENCY} or Poisson > {LOW_RATE:g} req/s; long prompts = >= {LONG_PROMPT} tokens in; MoE "
          "multi-GPU = an MoE model on TP x PP > 1 (a row may be in several; n rows, g groups)")
    return out


def goodput_range(errs: Err, key: Callable[[CalRow], str] = lambda r: r.source) -> tuple[float, float]:
    """p10 and p90 of measured / predicted throughput over held-out rows, each group (by `key`) weighted
    equally."""
    per: dict[str, list[float]] = defaultdict(list)
    for r, p, _ in errs:
        if metric_group(r.metric) == "throughput" and p > 0:
            per[key(r)].append(r.value / p)
    vals, wts = [], []
    for v in per.values():
        vals += v
        wts += [1.0 / len(v)] * len(v)
    order = np.argsort(vals)
    cw = np.cumsum(np.array(wts)[order]) / sum(wts)
    sv = np.array(vals)[order]
    return float(sv[np.searchsorted(cw, 0.10)]), float(sv[np.searchsorted(cw, 0.90)])


def _arg(argv: list[str], name: str, default: str) -> str:
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else default


def main(argv: list[str]) -> int:
    valued = {"--jobs", "--json"}
    paths = [Path(a) for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] not in valued)]
    jobs = int(_arg(argv, "--jobs", "1"))
    nfev = 40 if "--quick" in argv else 400
    catalog = load_catalog()
    skipped: dict[str, int] = {}
    rows = [r for p in paths for r in load_rows(catalog, p, skipped)] if paths else load_rows(catalog, None, skipped)
    names = ", ".join(p.name for p in paths) if paths else \
        "perf_points.csv + perf_points_2026.csv + perf_points_2026_ext.csv"
    for why, n in sorted(skipped.items()):
        print(f"left out {n} rows: {why}")
    key = group_key()
    ok = True
    if "--in-sample-only" not in argv:
        t = time.time()
        logo = held_out(catalog, rows, key, jobs=jobs, max_nfev=nfev)
        wall = time.time() - t
        quick = ", QUICK refits" if nfev < 400 else ""
        o = print_table(f"LEAVE-ONE-GROUP-OUT median absolute % error on {names} ({len(rows)} rows, "
                        f"{len({key(r) for r in rows})} publisher/harness groups{quick}): refit without the group, "
                        "predict it", logo, key)
        ok = all(o.get(g, 1.0) <= target for g, target in TARGETS.items())
        print("targets (grouped held out: throughput <= 12%, TTFT <= 18%, ITL/TPOT <= 18%):",
              "met" if ok else "NOT met")
        lo, hi = goodput_range(logo, key)
        print(f"held-out measured/predicted throughput (each group weighted equally): p10 {lo:.2f}, p90 {hi:.2f}")
        print()
        print_regimes("PER REGIME, leave-one-group-out (median of per-group medians)", logo, key)
        print(f"  ({wall:.0f} s wall for the grouped refits, {jobs} job(s))")
        if "--json" in argv:
            Path(_arg(argv, "--json", "accuracy.json")).write_text(json.dumps(
                [{"id": r.id, "group": key(r), "metric": r.metric, "stat": r.stat, "measured": r.value,
                  "predicted": p, "regimes": regimes(r)} for r, p, _ in logo], indent=0) + "\n", encoding="utf-8")
        if "--by-source" in argv:
            print()
            loso = held_out(catalog, rows, lambda r: r.source, jobs=jobs, max_nfev=nfev)
            print_table("LEAVE-ONE-SOURCE-OUT (each page its own source: optimistic, siblings stay in)", loso)
        if "--gpu" in argv:
            print()
            logpu = held_out(catalog, rows, lambda r: r.gpu, jobs=jobs, max_nfev=nfev)
            print_table("LEAVE-ONE-GPU-OUT (per GPU type)", logpu, lambda r: r.gpu)
        print()
    errs = row_errors(catalog, rows)
    if "--rows" in argv:
        for r, p, e in errs:
            print(f"{r.id:16} {r.metric:18} {r.stat:5} measured {r.value:10.1f} predicted {p:10.1f}  err {e:6.1%}")
    print_table("in-sample (bundled calibration, fitted on all rows): NOT an accuracy claim", errs, key)
    print_regimes("in-sample per regime", errs, key)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
