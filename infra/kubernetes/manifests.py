"""`llmcap render` (EKS target) also writes the Kubernetes side as files a GitOps user can apply:
`DIR/manifests/NN-<kind>-<name>.yaml`, one object per file as it would be applied, numbered in
apply order (namespace first, custom resources after their controllers' charts). Helm releases
are not Kubernetes objects: each goes to `DIR/helm/<release>.yaml` (chart, version and values).
Secret values are never written: `DIR/secrets.md` lists the `kubectl create secret` commands
to run instead. Works on the rendered resources ({"type", "name", "inputs"}), no pulumi import."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from infra.kubernetes.k8s_common import API_KEY_SECRET, API_KEY_SECRET_KEY, HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY

ORDER = {"Namespace": 0, "ServiceAccount": 10, "Role": 10, "RoleBinding": 10, "ConfigMap": 10, "Job": 20,
         "Deployment": 30, "LeaderWorkerSet": 30, "Service": 40, "PodDisruptionBudget": 40,
         "ScaledObject": 50, "PodMonitor": 50}
HELM_TYPE = "kubernetes:helm.sh/v3:Release"
# the engine redacts a secret Secret's whole stringData, keys included
SECRET_KEYS = {API_KEY_SECRET: API_KEY_SECRET_KEY, HF_TOKEN_SECRET: HF_TOKEN_SECRET_KEY}


def kubernetes_objects(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The applied form of every Kubernetes object among the rendered resources (not Helm releases)."""
    objs = []
    for r in resources:
        if not r["type"].startswith("kubernetes:") or r["type"] == HELM_TYPE:
            continue
        inputs = dict(r["inputs"])
        if "apiVersion" not in inputs or "kind" not in inputs:
            continue
        head = {"apiVersion": inputs.pop("apiVersion"), "kind": inputs.pop("kind"),
                "metadata": inputs.pop("metadata")}
        objs.append({**head, **inputs})
    return objs


def _file_name(obj: dict[str, Any]) -> str:
    kind = obj["kind"]
    slug = re.sub(r"[^a-z0-9-]+", "-", f"{kind}-{obj['metadata']['name']}".lower())
    return f"{ORDER.get(kind, 60):02d}-{slug}.yaml"


def write_manifests(resources: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    mdir = out_dir / "manifests"
    mdir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    secrets: list[dict[str, Any]] = []
    for obj in sorted(kubernetes_objects(resources), key=_file_name):
        if obj["kind"] == "Secret":
            secrets.append(obj)
            continue
        path = mdir / _file_name(obj)
        path.write_text(yaml.safe_dump(obj, sort_keys=True, width=120), encoding="utf-8")
        written.append(path)
    hdir = out_dir / "helm"
    for r in resources:
        if r["type"] == HELM_TYPE:
            hdir.mkdir(parents=True, exist_ok=True)
            i = r["inputs"]
            doc = {"release": i.get("name", r["name"]), "chart": i.get("chart"), "version": i.get("version"),
                   "repo": (i.get("repositoryOpts") or {}).get("repo"), "namespace": i.get("namespace"),
                   "values": i.get("values") or {}}
            path = hdir / f"{r['name']}.yaml"
            path.write_text(yaml.safe_dump(doc, sort_keys=False, width=120), encoding="utf-8")
            written.append(path)
    if secrets:
        lines = ["# Secrets to create before applying manifests/ (values are never written to disk)", ""]
        for s in secrets:
            md = s["metadata"]
            data = s.get("stringData")
            names = list(data) if isinstance(data, dict) else [SECRET_KEYS.get(md["name"], "value")]
            keys = " ".join(f"--from-literal={k}=..." for k in names)
            lines.append(f"    kubectl -n {md.get('namespace', 'default')} create secret generic {md['name']} {keys}")
        path = out_dir / "secrets.md"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written.append(path)
    return written
