"""How long the performance model takes: one estimate of each kind, and goodput per candidate.
Prints mean and worst times in ms over many configurations (target: an estimate < 50 ms,
goodput well under 5 ms so that `llmcap plan` stays under 1 s).

Usage: python bench/perf_speed.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sizing.catalog.lookup import load_catalog  # noqa: E402
from sizing.perf import load as perf  # noqa: E402
from sizing.perf.goodput import goodput
from sizing.perf.load import WorkloadShape, estimate_closed_loop, estimate_offline, estimate_open_loop
from sizing.perf.replica import ReplicaConfig

MODELS = ("llama-3.1-8b-instruct", "llama-3.1-70b-instruct", "mixtral-8x7b-instruct", "qwen3-8b")
GPUS = (("L4", 4), ("A10G", 4), ("L40S", 4), ("A100-80GB", 8), ("H100-SXM", 8))


def main() -> int:
    cat = load_catalog()
    cfgs = [ReplicaConfig(cat.model(m), g, p, tp=tp) for m in MODELS for g, n in GPUS
            for p in ("fp16", "fp8") for tp in (1, 2, 4, 8) if tp <= n]
    shape = WorkloadShape(1024, 512)
    timings: dict[str, list[float]] = {k: [] for k in ("first (cold) estimate", "closed loop", "open loop",
                                                      "offline", "goodput")}
    for cfg in cfgs:
        perf.clear_caches()
        t = time.perf_counter()
        estimate_closed_loop(cat, cfg, shape, 8)
        timings["first (cold) estimate"].append(time.perf_counter() - t)
        for name, fn in (("closed loop", lambda c=cfg: estimate_closed_loop(cat, c, shape, 32)),
                         ("open loop", lambda c=cfg: estimate_open_loop(cat, c, shape, 2.0)),
                         ("offline", lambda c=cfg: estimate_offline(cat, c, shape)),
                         ("goodput", lambda c=cfg: goodput(cat, c, shape, 1000.0, 25.0))):
            t = time.perf_counter()
            fn()
            timings[name].append(time.perf_counter() - t)
    print(f"{len(cfgs)} configurations")
    for k, v in timings.items():
        print(f"  {k:22} mean {1e3 * sum(v) / len(v):7.3f} ms   worst {1e3 * max(v):7.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
