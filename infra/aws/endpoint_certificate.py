"""The endpoint's TLS certificate when the stack names none (issue 32: TLS by default), as a
ComponentResource (`llmcap:infra:EndpointCertificate`): a CA of the stack's own (its key lives only in the
Pulumi state, as a secret), a server certificate it signs for every NLB name of the region
(`*.elb.<region>.amazonaws.com`: the certificate exists before the AWS Load Balancer Controller names the
NLB), imported into ACM for the NLB's TLS listener. No charge: ACM imports are free and the tls provider's
resources are computed locally (infra/data/tls.yaml, with the alternatives and their costs). Clients trust
the CA, the stack output `endpointCaCertificate` (docs/security.md "TLS on the endpoint")."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_tls as tls

from infra.config import settings
from infra.config.names import COMPONENT_PREFIX


def created_settings() -> dict[str, Any]:
    """infra/data/tls.yaml `created`: names, key, validity."""
    return dict(settings.tls()["created"])


def dns_name(region: str) -> str:
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return str(created_settings()["dns_name"]).format(region=region, dns_suffix=suffix)


class EndpointCertificate(pulumi.ComponentResource):
    arn: pulumi.Output[str]
    ca_certificate_pem: pulumi.Output[str]

    def __init__(self, name: str, region: str, stack: str, tags: dict[str, str],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{COMPONENT_PREFIX}EndpointCertificate", f"{name}-endpoint", None, opts)
        c = created_settings()
        child = pulumi.ResourceOptions(parent=self)
        key_args = {"algorithm": c["key_algorithm"], "rsa_bits": int(c["rsa_bits"])}
        org = str(c["organization"])
        ca_key = tls.PrivateKey(f"{name}-endpoint-ca", **key_args, opts=child)
        ca = tls.SelfSignedCert(
            f"{name}-endpoint-ca", private_key_pem=ca_key.private_key_pem, is_ca_certificate=True,
            validity_period_hours=int(c["ca_validity_hours"]), allowed_uses=["cert_signing", "crl_signing"],
            subject=tls.SelfSignedCertSubjectArgs(common_name=f"{org} {stack} endpoint CA", organization=org),
            opts=child)
        key = tls.PrivateKey(f"{name}-endpoint", **key_args, opts=child)
        names = [dns_name(region)]
        csr = tls.CertRequest(
            f"{name}-endpoint", private_key_pem=key.private_key_pem, dns_names=names,
            subject=tls.CertRequestSubjectArgs(common_name=names[0], organization=org), opts=child)
        leaf = tls.LocallySignedCert(
            f"{name}-endpoint", cert_request_pem=csr.cert_request_pem, ca_private_key_pem=ca_key.private_key_pem,
            ca_cert_pem=ca.cert_pem, validity_period_hours=int(c["server_validity_hours"]),
            early_renewal_hours=int(c["server_early_renewal_hours"]),
            allowed_uses=["digital_signature", "key_encipherment", "server_auth"], opts=child)
        cert = aws.acm.Certificate(
            f"{name}-endpoint", private_key=key.private_key_pem, certificate_body=leaf.cert_pem,
            certificate_chain=ca.cert_pem, tags=tags, opts=child)
        self.arn = cert.arn
        self.ca_certificate_pem = ca.cert_pem
        self.register_outputs({"arn": self.arn, "caCertificatePem": self.ca_certificate_pem})
