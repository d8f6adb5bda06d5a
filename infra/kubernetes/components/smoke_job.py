"""The smoke Job (infra/kubernetes/smoke.py), created after every pool's workload and the router: Pulumi waits for
it to complete, so `pulumi up` succeeds only once each served model answered through the router's
Service, and fails with the check's one-line reason otherwise."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi

from infra.config import settings
from infra.config.names import COMPONENT_PREFIX
from infra.kubernetes import smoke
from infra.kubernetes.app_objects import minutes
from infra.kubernetes.components import apply

if TYPE_CHECKING:
    from infra.config.registry import ImageRefs
    from sizing.plan import Plan


@dataclass
class SmokeJobArgs:
    plan: Plan
    namespace: str
    url: str  # the router's Service inside the cluster (infra/kubernetes/smoke.py router_url)
    wait_s: int  # infra/kubernetes/smoke.py deadline_s over the pools' rollout timeouts
    images: pulumi.Output[ImageRefs]
    after: Sequence[pulumi.Resource]  # every pool's workload, the router's Deployment and Service, the API key


class SmokeJob(pulumi.ComponentResource):
    job: pulumi.Resource

    def __init__(self, name: str, args: SmokeJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(COMPONENT_PREFIX + "SmokeJob", name, None, opts)
        obj = smoke.job(args.plan, args.namespace, args.url, args.wait_s)
        obj["spec"] = args.images.apply(lambda i: smoke.job(
            args.plan, args.namespace, args.url, args.wait_s, i.router)["spec"])
        # the Job's activeDeadlineSeconds (wait_s + margin) and one more margin for its pod to start
        deadline = args.wait_s + 2 * settings.policy().smoke.margin_s
        self.job = apply.create(obj, pulumi.ResourceOptions(
            parent=self, depends_on=list(args.after),
            custom_timeouts=pulumi.CustomTimeouts(create=minutes(deadline), update=minutes(deadline))))
        self.register_outputs({})
