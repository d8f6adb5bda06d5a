"""Weights: the one-off Job that copies the model from the Hugging Face hub into the S3 bucket,
and the choice of how each pool's pods load them onto the GPUs.

- `nvme`: an init container syncs the model from S3 onto an emptyDir. GPU nodes stripe their
  instance-store NVMe into the kubelet's ephemeral storage (infra/data/platform.yaml:
  local_storage_strategy RAID0), so the copy lands on local NVMe and vLLM reads it from there. Only
  where the node holds one pod of the pool: an emptyDir is per pod, so several pods would mean several
  copies per node (sizing.perf.cold_start.weights_mode).
- `s3-stream`: vLLM streams the safetensors straight from S3 into GPU memory with the Run:ai
  model streamer (`--load-format runai_streamer` with an s3:// model path); no local copy. A node
  packed with several replicas (8 x TP1 on a p5en or p4de) streams; its pods share the node's S3
  throughput, which the plan's cold start and startup probe count.

No pulumi import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.config import settings
from infra.config.names import GPU_TAINT_KEY, GPU_TAINT_VALUE, POOL_LABEL, WEIGHTS_LOADER_SERVICE_ACCOUNT
from infra.config.registry import ImageRefs
from infra.kubernetes.engines import image_of
from infra.kubernetes.k8s_common import (
    HF_TOKEN_SECRET,
    HF_TOKEN_SECRET_KEY,
    cache_size_limit,
    container_security_context,
    meta,
    pod_security_context,
    secret_env,
)
from infra.kubernetes.vllm_args import ModelSource

if TYPE_CHECKING:
    from sizing.plan import Pool

MODEL_DIR = "/models/model"
JOB_NAME = "weights-copy"


@dataclass(frozen=True)
class WeightsLocation:
    bucket: str
    prefix: str  # e.g. models/meta-llama/Meta-Llama-3-8B-Instruct/

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix.strip('/')}/"


def model_source(where: WeightsLocation, mode: str) -> ModelSource:
    """Where vLLM reads the weights: the node's copy (`mode` nvme, sizing.planning.node_storage.loading_mode)
    or the bucket through the Run:ai streamer (s3-stream)."""
    if mode == "nvme":
        return ModelSource(path=MODEL_DIR)
    return ModelSource(path=where.uri, load_format="runai_streamer")


def weights_access(where: WeightsLocation, region: str, mode: str,
                   aws_cli_image: str | None = None) -> tuple[ModelSource, dict[str, Any] | None]:
    """What a serving pod needs to reach the weights in `mode`: vLLM's model source, and the init container
    that copies the checkpoint onto the node (nvme mode only; None when vLLM streams from S3)."""
    sync = sync_init_container(where, region, aws_cli_image) if mode == "nvme" else None
    return model_source(where, mode), sync


def _requests(r: settings.Requests) -> dict[str, Any]:
    """CPU and memory requests, memory limited to its request (Guaranteed memory)."""
    return {"requests": {"cpu": r.cpu, "memory": r.memory}, "limits": {"memory": r.memory}}


def _aws_env(region: str) -> list[dict[str, Any]]:
    return [{"name": "AWS_REGION", "value": region}, {"name": "HOME", "value": "/home/app"}]


def sync_init_container(where: WeightsLocation, region: str, image: str | None = None) -> dict[str, Any]:
    """Copies the model from S3 onto the pod's NVMe-backed emptyDir before vLLM starts."""
    return {
        "name": "weights-sync",
        "image": image or settings.image("aws_cli").ref,
        "command": ["aws", "s3", "sync", where.uri, MODEL_DIR, "--only-show-errors", "--no-progress"],
        "env": _aws_env(region),
        "resources": _requests(settings.policy().weights_job.sync),
        "securityContext": container_security_context(read_only_root=True),
        "volumeMounts": [{"name": "models", "mountPath": "/models"}, {"name": "home", "mountPath": "/home/app"},
                         {"name": "tmp", "mountPath": "/tmp"}],
    }


def copy_job(namespace: str, model: str, where: WeightsLocation, region: str, pool: Pool,
             with_hf_token: bool, name: str = JOB_NAME,
             revision: str | None = None, images: ImageRefs | None = None) -> dict[str, Any]:
    """Hub → S3, once per checkpoint: `model` is the checkpoint the pool serves (`pool.vllm.model`).
    Runs on a node of `pool`, the first pool serving it (its NVMe holds the scratch copy; a system
    node's root volume would not hold a 405B checkpoint), without requesting a GPU."""
    images = images or ImageRefs.upstream()
    job, scratch = settings.policy().weights_job, settings.policy().scratch.size_limit
    download_env = [{"name": "HOME", "value": "/home/app"}, {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"}]
    if with_hf_token:
        download_env.append(secret_env("HF_TOKEN", HF_TOKEN_SECRET, HF_TOKEN_SECRET_KEY))
    mounts = [{"name": "models", "mountPath": "/models"}, {"name": "home", "mountPath": "/home/app"},
              {"name": "tmp", "mountPath": "/tmp"}]
    pod = {
        "serviceAccountName": WEIGHTS_LOADER_SERVICE_ACCOUNT,
        # S3 credentials come from EKS Pod Identity's own projected token; the job never calls the Kubernetes API
        "automountServiceAccountToken": False,
        "restartPolicy": "OnFailure",
        "securityContext": pod_security_context(),
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Equal", "value": GPU_TAINT_VALUE,
                         "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": [pool.name]}]}]}}},
        "initContainers": [{
            "name": "download",
            # the pool's own engine image, already on its nodes; the `hf` CLI ships with huggingface_hub in
            # both (sglang 0.5.23 pins transformers==5.19.0, which requires huggingface-hub>=1.31.0);
            # original/* holds duplicate consolidated .pth files that the engines do not read
            "image": image_of(pool, images),
            # --revision: the commit pinned in sizing/data/checkpoints.csv (the plan's checkpoint_revision)
            "command": ["hf", "download", model, *(["--revision", revision] if revision else []),
                        "--local-dir", MODEL_DIR, "--exclude", "original/*"],
            "env": download_env,
            "resources": _requests(job.download),
            "securityContext": container_security_context(read_only_root=True),
            "volumeMounts": mounts,
        }],
        "containers": [{
            "name": "upload",
            "image": images.aws_cli,
            "command": ["aws", "s3", "sync", MODEL_DIR, where.uri, "--only-show-errors", "--no-progress",
                        "--exclude", ".cache/*"],
            "env": _aws_env(region),
            "resources": _requests(job.upload),
            "securityContext": container_security_context(read_only_root=True),
            "volumeMounts": mounts,
        }],
        "volumes": [{"name": "models", "emptyDir": {"sizeLimit": cache_size_limit(pool)}},
                    {"name": "home", "emptyDir": {"sizeLimit": scratch}},
                    {"name": "tmp", "emptyDir": {"sizeLimit": scratch}}],
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": meta(name, namespace, {"app.kubernetes.io/name": "weights-copy",
                                               "app.kubernetes.io/part-of": "llmcap"}),
        "spec": {"backoffLimit": job.backoff_limit, "activeDeadlineSeconds": job.active_deadline_s,
                 "template": {"metadata": {"labels": {"app.kubernetes.io/name": "weights-copy"}}, "spec": pod}},
    }
