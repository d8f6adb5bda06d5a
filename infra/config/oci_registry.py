"""Read an image tag's digest from a registry, with the OCI distribution API (no Docker, no SDK).

`HEAD /v2/<name>/manifests/<reference>` with the manifest media types in `Accept`; the registry answers
the content digest in `Docker-Content-Digest` (OCI distribution-spec v1.1.0, spec.md "Pulling manifests":
"If a manifest is found, a 200 OK response SHOULD be returned ... The Docker-Content-Digest header, if
present on the response, returns the canonical digest of the uploaded blob"). A registry that omits it
on HEAD is asked with GET and the digest is the sha256 of the body as sent (spec.md "Content Digests").
A 401 with `WWW-Authenticate: Bearer realm=...,service=...,scope=...` is answered with an anonymous token
from the realm (Docker "Token Authentication Specification", distribution/docs/spec/auth/token.md: GET
realm?service=...&scope=repository:<name>:pull, the token in `token` or `access_token`), then the request
is retried with `Authorization: Bearer`.

Plain HTTP only for loopback hosts (127.0.0.0/8, ::1, localhost), which Docker itself treats as insecure
registries by default (docs.docker.com/reference/cli/dockerd/#insecure-registries: "Local registries,
whose IP address falls in the 127.0.0.0/8 range, are automatically marked as insecure"); HTTPS otherwise.
Pure standard library; no pulumi.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

# an image index first, so a multi-architecture tag resolves to the index every node pulls by
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # distribution's own limit on a manifest PUT is 4 MiB
TIMEOUT_S = 20.0


class RegistryError(Exception):
    """One line: which reference, which registry, what went wrong."""


@dataclass(frozen=True)
class Resolved:
    digest: str  # sha256:<64 hex>
    api: str  # the registry API base it was read from, e.g. https://registry-1.docker.io


def api_base(host: str) -> str:
    """`https://<host>`, or `http://` for a loopback registry."""
    name = urllib.parse.urlsplit("//" + host).hostname or host
    try:
        loopback = ipaddress.ip_address(name).is_loopback
    except ValueError:
        loopback = name == "localhost"
    return f"{'http' if loopback else 'https'}://{host}"


def _challenge(header: str) -> dict[str, str]:
    """The parameters of a `Bearer realm="...",service="...",scope="..."` challenge."""
    if not header.lower().startswith("bearer "):
        return {}
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


def _token(params: dict[str, str], name: str, timeout_s: float) -> str:
    realm = params.get("realm")
    if not realm:
        raise RegistryError("the registry asked for credentials without a token realm")
    query = {"scope": params.get("scope") or f"repository:{name}:pull"}
    if params.get("service"):
        query["service"] = params["service"]
    url = f"{realm}{'&' if '?' in realm else '?'}{urllib.parse.urlencode(query)}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:  # noqa: S310 - http(s) realm from the registry
            doc: Any = json.loads(r.read(MAX_MANIFEST_BYTES))
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise RegistryError(f"token from {realm}: {e}") from None
    tok = doc.get("token") or doc.get("access_token") if isinstance(doc, dict) else None
    if not isinstance(tok, str) or not tok:
        raise RegistryError(f"token from {realm}: no token in the answer")
    return tok


def _request(url: str, method: str, token: str | None, timeout_s: float) -> tuple[int, dict[str, str], bytes]:
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:  # noqa: S310 - http(s) only (api_base)
            body = r.read(MAX_MANIFEST_BYTES + 1) if method == "GET" else b""
            return r.status, {k.lower(): v for k, v in r.headers.items()}, body
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, b""
    except (urllib.error.URLError, OSError) as e:
        raise RegistryError(f"{url}: {getattr(e, 'reason', e)}") from None


def resolve_digest(host: str, name: str, tag: str, timeout_s: float = TIMEOUT_S) -> Resolved:
    """The digest `host/name:tag` points at now, or RegistryError (one line)."""
    base = api_base(host)
    url = f"{base}/v2/{name}/manifests/{urllib.parse.quote(tag, safe='')}"
    token: str | None = None
    for method in ("HEAD", "GET"):
        status, headers, body = _request(url, method, token, timeout_s)
        if status == 401 and token is None:
            token = _token(_challenge(headers.get("www-authenticate", "")), name, timeout_s)
            status, headers, body = _request(url, method, token, timeout_s)
        if status == 404:
            raise RegistryError(f"{host}/{name}:{tag}: no such tag on the registry (404)")
        if status != 200:
            raise RegistryError(f"{host}/{name}:{tag}: the registry answered {status}")
        digest = headers.get("docker-content-digest", "")
        if method == "GET" and not digest:
            if len(body) > MAX_MANIFEST_BYTES:
                raise RegistryError(f"{host}/{name}:{tag}: manifest above {MAX_MANIFEST_BYTES} bytes")
            digest = "sha256:" + hashlib.sha256(body).hexdigest()
        if digest:
            if not DIGEST.match(digest):
                raise RegistryError(f"{host}/{name}:{tag}: not a sha256 digest: {digest[:80]!r}")
            return Resolved(digest=digest, api=base)
    raise RegistryError(f"{host}/{name}:{tag}: the registry sent no digest")  # pragma: no cover - GET hashes
