"""What tuning the batching flags does to each bundled stack's plan (sizing/planning/batching.py).

Prints, per stack, the cheapest plan with vLLM's default max_num_batched_tokens / max_num_seqs
(analytic model only) beside the plan whose finalists had their flags tuned and their goodput
checked by the step-level simulation (sizing/perf/sim.py): instance, replicas, $/month, goodput
per replica (output tokens/s), the chosen budget and what binds.

Usage: python bench/tuning_effect.py [STACK ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sizing.errors import LlmcapError  # noqa: E402
from sizing.planning.planner import plan_stack  # noqa: E402
from sizing.stack import load_stack  # noqa: E402


def main() -> int:
    stacks = [Path(a) for a in sys.argv[1:]] or sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
    print(f"{'stack':26} {'default flags':40} {'tuned + simulated':52} binds")
    for path in stacks:
        st = load_stack(path)
        try:
            a = plan_stack(st, goodput_scale=None, tune_batching=False)
            b = plan_stack(st, goodput_scale=None)
        except LlmcapError as e:
            print(f"{path.name:26} {e}")
            continue
        pa, pb = a.pools[0], b.pools[0]
        left = (f"{pa.instance_type} {pa.precision} ×{pa.replicas} ${a.totals.usd_per_month:,.0f} "
                f"{pa.per_replica.goodput_output_tokens_per_s:,.0f} tok/s")
        right = (f"{pb.instance_type} {pb.precision} ×{pb.replicas} ${b.totals.usd_per_month:,.0f} "
                 f"{pb.per_replica.goodput_output_tokens_per_s:,.0f} tok/s, budget {pb.vllm.max_num_batched_tokens}")
        name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        print(f"{name:26} {left:40} {right:52} {pb.per_replica.bound}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
