"""The reference scenario: Llama-3-8B-Instruct, 1,024 prompt / 512 output tokens, TTFT p95 1 s,
ITL p95 25 ms, vLLM. Prints goodput per GPU (one replica, tp=1) at FP16, FP8 and int4-AWQ side by
side; where no load meets the SLO it prints "infeasible" and why, never a number.

Usage: python bench/reference_scenario.py [--itl-p95-ms 25] [--ttft-p95-ms 1000] [--engine vllm]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sizing.catalog.lookup import load_catalog  # noqa: E402
from sizing.perf.goodput import goodput
from sizing.perf.load import WorkloadShape  # noqa: E402
from sizing.perf.replica import ReplicaConfig

MODEL = "meta-llama/Meta-Llama-3-8B-Instruct"
GPUS = ("L4", "A10G", "L40S", "A100-80GB", "H100-SXM")
PRECISIONS = ("fp16", "fp8", "int4-awq")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--itl-p95-ms", type=float, default=25.0)
    ap.add_argument("--ttft-p95-ms", type=float, default=1000.0)
    ap.add_argument("--engine", default="vllm")
    a = ap.parse_args(argv)
    cat = load_catalog()
    model = cat.model(MODEL)
    shape = WorkloadShape(prompt_tokens=1024, output_tokens=512)
    print(f"{MODEL}, 1024 in / 512 out, TTFT p95 <= {a.ttft_p95_ms:g} ms, ITL p95 <= {a.itl_p95_ms:g} ms, "
          f"{a.engine}, one GPU per replica")
    print("goodput = output tokens/s per GPU at the largest concurrency meeting both targets (closed loop); "
          "in brackets its p10-p90 range from the held-out error\n")
    print(f"{'GPU':10}" + "".join(f"{p:>30}" for p in PRECISIONS))
    notes: list[str] = []
    for g in GPUS:
        cells = []
        for p in PRECISIONS:
            gp = goodput(cat, ReplicaConfig(model=model, gpu=g, precision=p, engine=a.engine), shape,
                         a.ttft_p95_ms, a.itl_p95_ms)
            if gp.feasible and gp.at is not None:
                cells.append(f"{gp.output_tokens_per_s:.0f} ({gp.output_tokens_per_s_p10:.0f}-"
                             f"{gp.output_tokens_per_s_p90:.0f}) tok/s @ {gp.concurrency:.0f}")
            else:
                cells.append(f"infeasible [{len(notes) + 1}]")
                notes.append(f"[{len(notes) + 1}] {g} {p}: {gp.reason}")
        print(f"{g:10}" + "".join(f"{c:>30}" for c in cells))
    if notes:
        print()
        print("\n".join(notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
