"""One checkpoint's copy Job (Hugging Face hub -> the weights bucket, infra/kubernetes/weights.py), on a node of
the first pool that serves it. Pulumi waits for the Job to complete (up to its activeDeadlineSeconds)
before the pools that read its output roll out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi

from infra.config import settings
from infra.kubernetes import weights
from infra.kubernetes.app_objects import minutes
from infra.kubernetes.components import apply
from infra.kubernetes.k8s_common import meta

if TYPE_CHECKING:
    from infra.config.registry import ImageRefs
    from sizing.plan import Pool


@dataclass
class WeightsJobArgs:
    namespace: str
    checkpoint: str  # the Hugging Face id the pools serve (pool.vllm.model)
    job_name: str  # infra/config/names.py copy_job_name
    host: Pool  # the first pool serving the checkpoint: its node holds the scratch copy
    region: str
    weights_bucket: pulumi.Input[str]
    weights_prefix: str
    images: pulumi.Output[ImageRefs]
    with_hf_token: bool
    after: Sequence[pulumi.Resource]  # the secrets, the service accounts and the device plugin


class WeightsJob(apply.MovedOutOfApp):
    job: pulumi.CustomResource

    def __init__(self, name: str, args: WeightsJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("WeightsJob", name, opts)
        spec = pulumi.Output.all(args.weights_bucket, args.images).apply(lambda a: weights.copy_job(
            args.namespace, args.checkpoint, weights.WeightsLocation(a[0], args.weights_prefix), args.region,
            args.host, with_hf_token=args.with_hf_token, name=args.job_name,
            revision=args.host.checkpoint_revision, images=a[1])["spec"])
        wait = minutes(settings.policy().weights_job.active_deadline_s)
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(args.job_name, args.namespace), "spec": spec}
        self.job = apply.create(job,
                                self.child(args.after, custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait)))
        self.register_outputs({})
