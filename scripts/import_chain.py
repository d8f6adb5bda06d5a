"""The import graph of llmcap's own modules (sizing/, infra/): size, import circles, edges that climb
a layer (the layers of tests/test_layering.py), and the longest chain of imports.

    python scripts/import_chain.py [--type-checking]

Edges include lazy imports inside functions; `if TYPE_CHECKING:` imports are left out unless asked
(`--type-checking` counts them too). A circle counts as one step of a chain.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests/

from tests import import_graph as ig  # noqa: E402
from tests.test_layering import ALLOWED, LAYERS, layer_of_factory  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--type-checking", action="store_true", help="count `if TYPE_CHECKING:` imports as edges")
    args = ap.parse_args()
    g = ig.import_graph(ROOT, ["sizing", "infra"], type_checking=args.type_checking)
    layer_of = layer_of_factory(LAYERS)
    print(f"{len(g)} modules, {sum(len(v) for v in g.values())} import edges")
    for comp in ig.strongly_connected(g):
        print(f"circle: {' <-> '.join(comp)}")
    for a, b in ig.upward_edges(g, layer_of):
        print(f"upward: {a} (layer {layer_of(a)}) -> {b} (layer {layer_of(b)})")
    sizing_only = {m: {d for d in deps if d.split(".")[0] == "sizing"} for m, deps in g.items()
                   if m.split(".")[0] == "sizing"}
    chain = ig.longest_chain(sizing_only)
    print(f"longest chain in sizing/: {len(chain)} modules: {' -> '.join(chain)}")
    chain = ig.longest_chain(g)
    print(f"longest chain in sizing/ and infra/: {len(chain)} modules: {' -> '.join(chain)}")
    problems = ig.layering_problems(g, layer_of, ALLOWED)
    print(f"layering problems beyond the allowlist ({len(ALLOWED)} edges): {len(problems)}")
    for p in problems:
        print(f"  {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
