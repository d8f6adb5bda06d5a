"""The router (vLLM production-stack router, infra/kubernetes/router.py): its service account and read-only
Role, the Deployment and its PodDisruptionBudget on the system nodes, and the Service the AWS Load
Balancer Controller turns into an NLB. Exposes `endpoint` (scheme and the NLB's hostname)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi

from infra.kubernetes import router
from infra.kubernetes.app_objects import minutes
from infra.kubernetes.components import apply

if TYPE_CHECKING:
    from infra.config.registry import ImageRefs
    from sizing.deployment import DeploymentOptions


@dataclass
class RouterArgs:
    namespace: str
    options: DeploymentOptions  # llmcap:deployment: public/internal NLB, TLS certificate, allowed CIDRs
    images: pulumi.Output[ImageRefs]
    namespace_ready: Sequence[pulumi.Resource]
    secrets: Sequence[pulumi.Resource]  # the API key (and HF token) Secrets the router's pods read
    # the AWS Load Balancer Controller's release (infra/kubernetes/components/addons.py): it provisions the
    # Service's NLB
    # (`loadBalancerClass: service.k8s.aws/nlb`), so the Service waits for it
    load_balancer_controller: pulumi.Resource | None = None
    # the ACM certificate the deployment created (infra/aws/endpoint_certificate.py); None: the stack's
    # tls_certificate_arn, or plain HTTP with allow_plain_http_endpoint
    certificate_arn: pulumi.Input[str] | None = None
    # the pools' workloads: the router is ready only with an engine (infra/kubernetes/router.py readiness_probe), so
    # its Deployment is created after them and Pulumi waits for it as long as for the slowest pool
    engines: Sequence[pulumi.Resource] = ()
    ready_timeout_s: int | None = None


class Router(apply.MovedOutOfApp):
    endpoint: pulumi.Output[str]
    deployment: pulumi.Resource
    service: pulumi.Resource

    def __init__(self, name: str, args: RouterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("Router", name, opts)
        ns = args.namespace
        in_ns = self.child(args.namespace_ready)
        apply.create(router.service_account(ns), in_ns)
        apply.create(router.role(ns), in_ns)
        apply.create(router.role_binding(ns), in_ns)
        obj = router.deployment(ns)
        obj["spec"] = args.images.apply(lambda i: router.deployment(ns, i.router)["spec"])
        wait = {"custom_timeouts": pulumi.CustomTimeouts(create=minutes(args.ready_timeout_s),
                                                         update=minutes(args.ready_timeout_s))} \
            if args.ready_timeout_s else {}
        self.deployment = apply.create(obj, self.child([*args.namespace_ready, *args.secrets, *args.engines], **wait))
        apply.create(router.disruption_budget(ns), in_ns)
        lbc = [args.load_balancer_controller] if args.load_balancer_controller is not None else []
        obj = router.service(ns, args.options)
        if args.certificate_arn is not None:  # the created certificate's ARN is known once ACM has it
            arn = pulumi.Output.from_input(args.certificate_arn)
            obj = router.service(ns, args.options, "(the created certificate)")
            obj["metadata"]["annotations"] = arn.apply(
                lambda a: router.service(ns, args.options, a)["metadata"]["annotations"])
        svc = self.service = apply.create(obj, self.child([*args.namespace_ready, *lbc]))
        scheme = "https" if args.options.tls_certificate_arn or args.certificate_arn is not None else "http"
        status: pulumi.Output[Any] = svc.status  # type: ignore[attr-defined]
        self.endpoint = status.apply(lambda s: endpoint_url(scheme, s))
        self.register_outputs({"endpoint": self.endpoint})


def endpoint_url(scheme: str, status: Any) -> str:
    """`scheme://host` of a LoadBalancer Service's status, or a line saying it has no address yet."""
    ingress = getattr(getattr(status, "load_balancer", None), "ingress", None) if status else None
    if not ingress:
        return "pending: the load balancer has no address yet"
    host = ingress[0].hostname or ingress[0].ip
    return f"{scheme}://{host}"
