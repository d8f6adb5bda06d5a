"""Prepare rendered manifests for checkov: copy `llmcap render`'s manifests/ into a scan folder,
add a Pod per LeaderWorkerSet template (checkov does not read that custom resource, so multi-node
vLLM pods would go unscanned), and put the resource-scoped skips of policy/checkov-skips.yaml on the
matching objects as `checkov.io/skipN` annotations. Prints the global skip ids, comma-separated.

    python scripts/checkov_prepare.py SKIPS_YAML SCAN_DIR RENDER_DIR [RENDER_DIR ...]
"""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path
from typing import Any

import yaml


def load_skips(path: Path) -> dict[str, dict[str, Any]]:
    skips = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for check, entry in skips.items():
        if not isinstance(entry, dict) or not str(entry.get("why", "")).strip():
            raise SystemExit(f"{path}: {check}: every skip needs a `why`")
    return skips


def lws_pods(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The leader and worker pod templates of a LeaderWorkerSet, as Pods."""
    tmpl = obj["spec"]["leaderWorkerTemplate"]
    pods = []
    for role in ("leaderTemplate", "workerTemplate"):
        t = tmpl.get(role)
        if t:
            md = {"name": f"{obj['metadata']['name']}-{role.removesuffix('Template')}",
                  "namespace": obj["metadata"].get("namespace"), "labels": t.get("metadata", {}).get("labels", {})}
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": t["spec"]})
    return pods


def annotate(obj: dict[str, Any], skips: dict[str, dict[str, Any]]) -> None:
    key = f"{obj['kind']}/{obj['metadata']['name']}"
    n = 0
    for check, entry in skips.items():
        if any(fnmatch.fnmatchcase(key, pat) for pat in entry.get("resources") or []):
            n += 1
            ann = obj["metadata"].setdefault("annotations", {})
            ann[f"checkov.io/skip{n}"] = f"{check}={' '.join(str(entry['why']).split())}"


def prepare(skips_path: Path, scan_dir: Path, render_dirs: list[Path]) -> list[str]:
    skips = load_skips(skips_path)
    scan_dir.mkdir(parents=True, exist_ok=True)
    for rdir in render_dirs:
        for f in sorted((rdir / "manifests").glob("*.yaml")):
            obj = yaml.safe_load(f.read_text(encoding="utf-8"))
            objs = [obj] + (lws_pods(obj) if obj["kind"] == "LeaderWorkerSet" else [])
            for i, o in enumerate(objs):
                annotate(o, skips)
                out = scan_dir / f"{rdir.name}-{f.stem}{'' if i == 0 else f'-pod{i}'}.yaml"
                out.write_text(yaml.safe_dump(o, sort_keys=True, width=120), encoding="utf-8")
    return [c for c, e in skips.items() if not e.get("resources")]


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    print(",".join(prepare(Path(argv[0]), Path(argv[1]), [Path(a) for a in argv[2:]])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
