"""The smoke Job: the last object of a deployment, awaited by Pulumi (a batch/v1 Job completes or
fails `pulumi up`). It sends one `/v1/chat/completions` and one `/v1/completions` request per served
model name (each request class's, in a dedicated layout) through the router's Service with the API key
and requires a non-empty answer, retrying until the slowest pool's rollout timeout plus a margin
(`deadline_s`): so it also waits for LeaderWorkerSet groups, which Pulumi does not await. Its check is
sizing/measure/smoke.py, run as a script in the router's image (python:3.12-slim, production-stack
docker/Dockerfile at vllm-stack-0.1.12), the same code `llmcap verify --smoke` runs. No pulumi import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.config import settings
from infra.config.names import ROLE_LABEL
from infra.kubernetes.k8s_common import (
    API_KEY_SECRET,
    API_KEY_SECRET_KEY,
    APP_LABEL,
    COMPONENT_LABEL,
    PART_OF_LABEL,
    container_security_context,
    meta,
    pod_security_context,
    secret_env,
)
from sizing.measure import smoke as smoke_check

if TYPE_CHECKING:
    from sizing.plan import Plan

NAME = "llmcap-smoke"
LABELS = {APP_LABEL: "smoke", COMPONENT_LABEL: "smoke", PART_OF_LABEL: "llmcap"}
SCRIPT = Path(smoke_check.__file__).read_text(encoding="utf-8")


def served_models(plan: Plan) -> list[str]:
    """Each served model name once, in pool order, with the further names a pool answers to: a dedicated
    layout's pools serve one name per request class (and the default class's pool the plain name too), so
    the Job sends one request per class name through the router, which routes each to its class's pool."""
    return list(dict.fromkeys(n for p in plan.pools for n in (p.vllm.served_model_name, *p.vllm.served_model_aliases)))


def deadline_s(pool_timeouts_s: list[int]) -> int:
    """How long the check may take (s): the slowest pool's rollout timeout plus the smoke margin."""
    return max(pool_timeouts_s, default=0) + settings.policy().smoke.margin_s


def router_url(service: str, namespace: str, service_port: int) -> str:
    """The router's Service inside the cluster (plain HTTP: TLS, when set, ends on the NLB)."""
    return f"http://{service}.{namespace}.svc:{service_port}"


def job(plan: Plan, namespace: str, url: str, wait_s: int, image: str | None = None) -> dict[str, Any]:
    """`url`: router_url(...); `wait_s`: deadline_s(...); `image`: the router's reference through the
    registry cache."""
    s = settings.policy().smoke
    r = {"cpu": s.resources.cpu, "memory": s.resources.memory}
    container = {
        "name": "smoke",
        "image": image or settings.image("router").ref,
        "command": ["python3", "-c", SCRIPT],
        "env": [{"name": "SMOKE_URL", "value": url},
                {"name": "SMOKE_MODELS", "value": json.dumps(served_models(plan))},
                {"name": "SMOKE_WAIT_S", "value": str(wait_s)},
                secret_env("VLLM_API_KEY", API_KEY_SECRET, API_KEY_SECRET_KEY)],
        "resources": {"requests": r, "limits": r},
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": container_security_context(read_only_root=True),
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": meta(NAME, namespace, LABELS),
        "spec": {
            "backoffLimit": s.backoff_limit,
            # the script's own deadline ends first; this one stops a pod that hangs anyway
            "activeDeadlineSeconds": wait_s + s.margin_s,
            "template": {"metadata": {"labels": LABELS}, "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "securityContext": pod_security_context(),
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": ROLE_LABEL, "operator": "In", "values": ["system"]}]}]}}},
                "containers": [container],
            }},
        },
    }
