"""Names shared by the AWS side and the Kubernetes side of the program, kept in one place."""

from __future__ import annotations

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
    """The S3 key prefix holding one model's files, e.g. `models/meta-llama/Meta-Llama-3-8B-Instruct/`."""
    return f"models/{hf_id.strip('/')}/"

# the AWS Load Balancer Controller (it provisions the router's NLB); its IAM role is created on the
# AWS side and bound to this service account through EKS Pod Identity
LOAD_BALANCER_CONTROLLER_NAMESPACE = "kube-system"
LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT = "aws-load-balancer-controller"

# the Cluster Autoscaler (it resizes the GPU node groups' Auto Scaling groups); its IAM role is bound to
# this service account through EKS Pod Identity
CLUSTER_AUTOSCALER_NAMESPACE = "kube-system"
CLUSTER_AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"
