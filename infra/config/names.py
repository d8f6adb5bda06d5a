"""Names shared by the AWS side and the Kubernetes side of the program, kept in one place."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

NAMESPACE = "llmcap"  # Kubernetes namespace of the serving stack
SERVING_SERVICE_ACCOUNT = "vllm"  # pods that read weights (read-only pod identity role)
WEIGHTS_LOADER_SERVICE_ACCOUNT = "weights-loader"  # the one-off job that writes weights (read-write role)

GPU_TAINT_KEY = "nvidia.com/gpu"  # the taint that only serving pods tolerate
GPU_TAINT_VALUE = "true"
POOL_LABEL = "llmcap.io/pool"  # node label: the plan pool's name
GPU_LABEL = "llmcap.io/gpu"  # node label: the GPU model, e.g. L4
ROLE_LABEL = "llmcap.io/role"  # node label: "gpu" or "system"

COMPONENT_PREFIX = "llmcap:infra:"


def weights_prefix(hf_id: str) -> str:
    """The S3 key prefix holding one checkpoint's files, e.g. `models/meta-llama/Meta-Llama-3-8B-Instruct/`.
    Always the checkpoint a pool serves (`pool.vllm.model`), never the plan's base model."""
    return f"models/{hf_id.strip('/')}/"


def served_checkpoints(pools: Iterable[Any]) -> list[str]:
    """The distinct checkpoints (`pool.vllm.model`) of the plan's pools, in pool order: one copy Job
    and one S3 prefix each."""
    return list(dict.fromkeys(p.vllm.model for p in pools))


def copy_job_name(hf_id: str, checkpoints: list[str]) -> str:
    """`weights-copy` when the plan serves one checkpoint, else `weights-copy-<slug>` per checkpoint
    (a DNS label: at most 63 characters, a short hash when the slug is cut)."""
    if len(checkpoints) <= 1:
        return "weights-copy"
    slug = re.sub(r"[^a-z0-9]+", "-", hf_id.split("/")[-1].lower()).strip("-")
    name = f"weights-copy-{slug}"
    if len(name) > 52 or sum(c.split("/")[-1].lower() == hf_id.split("/")[-1].lower() for c in checkpoints) > 1:
        name = f"{name[:43].rstrip('-')}-{hashlib.sha256(hf_id.encode()).hexdigest()[:8]}"
    return name

# the AWS Load Balancer Controller (it provisions the router's NLB); its IAM role is created on the
# AWS side and bound to this service account through EKS Pod Identity
LOAD_BALANCER_CONTROLLER_NAMESPACE = "kube-system"
LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT = "aws-load-balancer-controller"

# the Cluster Autoscaler (it resizes the GPU node groups' Auto Scaling groups); its IAM role is bound to
# this service account through EKS Pod Identity
CLUSTER_AUTOSCALER_NAMESPACE = "kube-system"
CLUSTER_AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"

# Karpenter's pod annotation that keeps it from voluntarily disrupting the pod's node (karpenter-provider-aws v1.14
# website/content/en/v1.14/concepts/disruption.md "Pod-Level Controls"): on the serving pods with Karpenter, so
# a node loading weights is never consolidated away (infra/karpenter/nodes.py)
DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}
