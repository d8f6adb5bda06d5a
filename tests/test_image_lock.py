"""Images pinned by digest (issue 32): `llmcap images lock STACK` reads each pinned tag's digest from the
registry (OCI distribution API, against a loopback fake registry here) into stacks/images.lock.json;
render and the Pulumi program deploy `<repo>:<tag>@sha256:...` from it, through the registry cache, for
llmcap's own images and the add-on charts' images; without a digest they stop with one line naming
`llmcap images lock`, unless the stack sets `allow_unpinned_images`, and then say so."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from infra.config.image_lock import ImageLock, ImagePins, deployed_images, lock_path, resolve_pins
from infra.config.oci_registry import MANIFEST_TYPES, RegistryError, resolve_digest
from sizing.stack import load_stack
from tests.isolation import no_local_data

ROOT = Path(__file__).resolve().parents[1]
STACKS = ROOT / "stacks"
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
INDEX = MANIFEST_TYPES[0]


def manifest(name: str, tag: str) -> bytes:
    return json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": [], "annotations": {
        "name": name, "tag": tag}}).encode()


class FakeRegistry(BaseHTTPRequestHandler):
    """`/v2/<name>/manifests/<tag>` behind Bearer token auth (realm `/token`); any name and tag exist
    except tag `missing`; names under `nodigest/` answer without Docker-Content-Digest."""

    seen: list[tuple[str, str, str]] = []  # (method, path, Accept)

    def log_message(self, *args: Any) -> None:
        pass

    def _manifest(self, method: str) -> None:
        self.seen.append((method, self.path, self.headers.get("Accept", "")))
        name, _, tag = self.path[len("/v2/"):].rpartition("/manifests/")
        if self.headers.get("Authorization") != f"Bearer tok-{name}":
            host = f"http://{self.headers['Host']}"
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Bearer realm="{host}/token",service="fake",'
                                                 f'scope="repository:{name}:pull"')
            self.end_headers()
            return
        if tag == "missing" or INDEX not in self.headers.get("Accept", ""):
            self.send_response(404)
            self.end_headers()
            return
        body = manifest(name, tag)
        self.send_response(200)
        self.send_header("Content-Type", INDEX)
        self.send_header("Content-Length", str(len(body)))
        if not name.startswith("nodigest/"):
            self.send_header("Docker-Content-Digest", "sha256:" + hashlib.sha256(body).hexdigest())
        self.end_headers()
        if method == "GET":
            self.wfile.write(body)

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self._manifest("HEAD")

    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/token?"):
            from urllib.parse import parse_qs, urlsplit

            scope = parse_qs(urlsplit(self.path).query)["scope"][0]
            body = json.dumps({"token": "tok-" + scope.split(":")[1]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)
            return
        self._manifest("GET")


@pytest.fixture
def registry() -> Iterator[str]:
    FakeRegistry.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeRegistry)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def expected_digest(name: str, tag: str) -> str:
    return "sha256:" + hashlib.sha256(manifest(name, tag)).hexdigest()


def cli(*args: str) -> tuple[int, str]:
    from sizing.cli import app

    r = CliRunner().invoke(app, list(args), env=ENV)
    return r.exit_code, r.output


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(STACKS, tmp_path / "stacks")
    monkeypatch.chdir(tmp_path)
    no_local_data(monkeypatch, tmp_path)
    return tmp_path


def set_deployment(stack_file: Path, **values: Any) -> None:
    doc = yaml.safe_load(stack_file.read_text())
    dep = doc["config"].setdefault("llmcap:deployment", {})
    dep.update(values)
    for k in [k for k, v in values.items() if v is None]:
        del dep[k]
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))


# --- the registry client ---------------------------------------------------------------------------

def test_resolve_digest_with_token_auth_and_the_index_media_type(registry: str) -> None:
    got = resolve_digest(registry, "docker-hub/vllm/vllm-openai", "v0.33.0")
    assert got.digest == expected_digest("docker-hub/vllm/vllm-openai", "v0.33.0")
    assert got.api == f"http://{registry}"  # loopback only; any other host is https
    heads = [s for s in FakeRegistry.seen if s[0] == "HEAD"]
    assert heads and all(INDEX in accept for _, _, accept in heads)  # a multi-arch tag resolves to its index


def test_a_head_without_the_digest_header_falls_back_to_hashing_the_manifest(registry: str) -> None:
    got = resolve_digest(registry, "nodigest/x", "v1")
    assert got.digest == expected_digest("nodigest/x", "v1")
    assert [method for method, path, _ in FakeRegistry.seen if "/manifests/" in path][-1] == "GET"


def test_a_missing_tag_and_an_unreachable_registry_are_one_line(registry: str) -> None:
    with pytest.raises(RegistryError, match=r"/x:missing: no such tag on the registry \(404\)"):
        resolve_digest(registry, "x", "missing")
    with pytest.raises(RegistryError, match="127.0.0.1:1/v2/x/manifests/v1"):
        resolve_digest("127.0.0.1:1", "x", "v1", timeout_s=2)


# --- llmcap images lock ----------------------------------------------------------------------------

def test_images_lock_writes_every_deployed_images_digest(project: Path, registry: str) -> None:
    stack_file = project / "stacks" / "Pulumi.dev.yaml"
    set_deployment(stack_file, image_registry=registry)
    (project / "stacks" / "images.lock.json").unlink(missing_ok=True)
    code, out = cli("images", "lock", "stacks/Pulumi.dev.yaml")
    assert code == 0, out
    lock = ImageLock.model_validate_json((project / "stacks" / "images.lock.json").read_text())
    images = deployed_images()
    assert set(lock.images) == set(images) >= {"vllm", "router", "aws_cli", "prometheus",
                                               "aws_load_balancer_controller", "cluster_autoscaler",
                                               "leaderworkerset"}
    from infra.config.registry import prefix

    for key, img in images.items():
        name = f"{prefix(img.registry)}/{img.image}"
        assert lock.images[key].digest == expected_digest(name, img.tag), key
        assert lock.images[key].reference == f"{img.registry}/{img.image}:{img.tag}"
        assert lock.images[key].resolved_from == f"http://{registry}"
    assert "wrote stacks/images.lock.json" in out


def test_images_lock_writes_nothing_when_one_image_fails(project: Path, registry: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from infra.config import settings

    stack_file = project / "stacks" / "Pulumi.dev.yaml"
    set_deployment(stack_file, image_registry=registry)
    lock_file = project / "stacks" / "images.lock.json"
    before = lock_file.read_text() if lock_file.exists() else None
    real = settings.image
    monkeypatch.setattr(settings, "image", lambda k: settings.Image("vllm/vllm-openai", "missing")
                        if k == "vllm" else real(k))
    code, out = cli("images", "lock", "stacks/Pulumi.dev.yaml")
    assert code == 2
    assert out.splitlines() == [f"error: vllm: {registry}/docker-hub/vllm/vllm-openai:missing: no such tag on "
                                "the registry (404); nothing written"]
    assert (lock_file.read_text() if lock_file.exists() else None) == before


# --- render and the program deploy the locked digests -----------------------------------------------

def fake_lock(path: Path) -> dict[str, str]:
    """A lock as `llmcap images lock` writes it, with made-up digests (tests only)."""
    from infra.config.image_lock import LockEntry, upstream_reference, write_lock

    digests = {k: "sha256:" + hashlib.sha256(k.encode()).hexdigest() for k in deployed_images()}
    write_lock(ImageLock(images={k: LockEntry(reference=upstream_reference(img), digest=digests[k],
                                              resolved_from="http://127.0.0.1", as_of="2026-12-03")
                                 for k, img in deployed_images().items()}), path)
    return digests


def test_render_without_a_lock_stops_with_one_line_naming_images_lock(project: Path) -> None:
    stack_file = project / "stacks" / "Pulumi.dev.yaml"
    set_deployment(stack_file, allow_unpinned_images=None)
    (project / "stacks" / "images.lock.json").unlink(missing_ok=True)
    code, out = cli("render", "stacks/Pulumi.dev.yaml", "--out", "out", "--fresh")
    assert code == 2, out
    assert out.splitlines() == [
        "error: stacks/images.lock.json: no image lock: run llmcap images lock stacks/Pulumi.dev.yaml where the "
        "registry is reachable and commit it (or set llmcap:deployment.allow_unpinned_images: true to deploy tags)"]
    assert not (project / "out").exists()
    code, out = cli("render", "stacks/Pulumi.dev.yaml", "--out", "out", "--fresh", "--target", "compose")
    assert code == 2 and "llmcap images lock" in out and not (project / "out").exists()


def test_the_opt_out_deploys_tags_and_says_so(project: Path) -> None:
    (project / "stacks" / "images.lock.json").unlink(missing_ok=True)
    stack = load_stack(project / "stacks" / "Pulumi.dev.yaml")
    assert stack.deployment.allow_unpinned_images  # the bundled stacks opt out: no registry reachable here
    pins = resolve_pins(project / "stacks" / "Pulumi.dev.yaml", allow_unpinned=True)
    assert set(pins.unpinned) == set(deployed_images())
    assert pins.warning().startswith("warning: images deployed by tag, not digest "
                                     "(llmcap:deployment.allow_unpinned_images: true): ")
    assert "llmcap images lock" in pins.warning()


def test_only_the_images_a_stack_pulls_count(project: Path) -> None:
    """A vLLM stack on managed node groups pulls no SGLang, Karpenter or LeaderWorkerSet image: the warning does
    not name them, and a lock missing only their digests does not refuse it; a multi-node stack pulls LWS's."""
    from infra.kubernetes.pulled_images import pulled_image_keys
    from sizing.planning.saved_plan import read_saved_plan, saved_plan_path

    def plan_of(name: str):  # type: ignore[no-untyped-def]
        st = load_stack(project / "stacks" / f"Pulumi.{name}.yaml")
        path = project / "stacks" / f"Pulumi.{name}.yaml"
        return st, read_saved_plan(saved_plan_path(path), path.as_posix()).plan

    dev_stack, dev = plan_of("dev")
    pulled = pulled_image_keys(dev, dev_stack.deployment.provisioner)
    assert "vllm" in pulled and "router" in pulled and "cluster_autoscaler" in pulled
    assert not {"sglang", "karpenter", "leaderworkerset"} & set(pulled)
    (project / "stacks" / "images.lock.json").unlink(missing_ok=True)
    warning = resolve_pins(project / "stacks" / "Pulumi.dev.yaml", allow_unpinned=True, pulled=pulled).warning()
    assert "vllm" in warning and "sglang" not in warning and "karpenter" not in warning
    lock_file = project / "stacks" / "images.lock.json"
    fake_lock(lock_file)
    doc = json.loads(lock_file.read_text())
    for unused in ("sglang", "karpenter", "leaderworkerset"):
        doc["images"].pop(unused, None)
    lock_file.write_text(json.dumps(doc))
    pins = resolve_pins(project / "stacks" / "Pulumi.dev.yaml", allow_unpinned=False, pulled=pulled)
    assert pins.unpinned == () and pins.warning() == ""
    big_stack, big = plan_of("llama405b")
    assert "leaderworkerset" in pulled_image_keys(big, big_stack.deployment.provisioner)
    with pytest.raises(Exception, match="leaderworkerset"):
        resolve_pins(project / "stacks" / "Pulumi.llama405b.yaml", allow_unpinned=False,
                     pulled=pulled_image_keys(big, big_stack.deployment.provisioner))


def test_a_lock_for_another_tag_is_not_used(project: Path) -> None:
    lock_file = project / "stacks" / "images.lock.json"
    fake_lock(lock_file)
    doc = json.loads(lock_file.read_text())
    doc["images"]["vllm"]["reference"] = "docker.io/vllm/vllm-openai:v0.32.0"
    lock_file.write_text(json.dumps(doc))
    with pytest.raises(Exception) as e:
        resolve_pins(project / "stacks" / "Pulumi.dev.yaml", allow_unpinned=False)
    assert "no digest for today's pin of vllm: run llmcap images lock" in str(e.value)


def test_the_locked_digests_reach_every_image_and_chart(project: Path) -> None:
    from infra.compose import build
    from infra.config.registry import ImageRefs
    from infra.kubernetes.components.addons import cluster_autoscaler_values, load_balancer_controller_values
    from tests.plan_factory import make_plan

    digests = fake_lock(project / "stacks" / "images.lock.json")
    pins = resolve_pins(project / "stacks" / "Pulumi.dev.yaml", allow_unpinned=False)
    assert pins.unpinned == () and pins.warning() == ""
    host = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
    refs = ImageRefs.through(host, pins)
    assert refs.vllm == f"{host}/docker-hub/vllm/vllm-openai:v0.33.0@{digests['vllm']}"
    assert refs.router.endswith(f"@{digests['router']}") and refs.aws_cli.endswith(f"@{digests['aws_cli']}")
    lbc = load_balancer_controller_values("c", "vpc-1", "us-east-1", host, pins)["image"]
    assert lbc == {"repository": f"{host}/ecr-public/eks/aws-load-balancer-controller",
                   "tag": f"v2.14.0@{digests['aws_load_balancer_controller']}"}
    ca = cluster_autoscaler_values("c", "us-east-1", host, pins)["image"]
    assert ca == {"repository": f"{host}/k8s/autoscaling/cluster-autoscaler",
                  "tag": f"v1.35.0@{digests['cluster_autoscaler']}"}
    from infra.kubernetes.components.addons import chart_image_values

    lws = chart_image_values("leaderworkerset", host, pins)
    assert lws == {"image": {"manager": {"repository": f"{host}/k8s/lws/lws",
                                         "tag": f"v0.10.0@{digests['leaderworkerset']}"}}}
    services = build(make_plan(), pins).compose["services"]
    assert services["vllm"]["image"] == f"vllm/vllm-openai:v0.33.0@{digests['vllm']}"
    assert services["prometheus"]["image"].endswith(f"@{digests['prometheus']}")


def test_a_rendered_stack_pulls_every_container_by_digest_through_the_cache(project: Path) -> None:
    """Under Pulumi's mocks: every container of every Kubernetes object llmcap creates, and the
    add-on charts' image values, carry the locked digest and the cache host."""
    from infra.kubernetes.manifests import kubernetes_objects
    from infra.program import render_stack
    from infra.render import resources_document
    from sizing.catalog.lookup import load_catalog
    from sizing.planning.planner import plan_stack

    digests = fake_lock(project / "stacks" / "images.lock.json")
    stack = load_stack(project / "stacks" / "Pulumi.dev.yaml")
    pins = resolve_pins(project / "stacks" / "Pulumi.dev.yaml", allow_unpinned=False)
    result = render_stack(stack, plan_stack(stack, load_catalog()), load_catalog(), pins)
    images = []

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("containers", "initContainers") and isinstance(v, list):
                    images.extend(c["image"] for c in v)
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(kubernetes_objects(resources_document(result)))
    assert images
    for ref in images:
        assert ".dkr.ecr." in ref and "@sha256:" in ref and ref.split("@")[1] in digests.values(), ref
    releases = [r for r in result.resources if r.type == "kubernetes:helm.sh/v3:Release"]
    tags = {r.name: r.inputs["values"].get("image", {}).get("tag", "") for r in releases}
    assert tags["aws-load-balancer-controller"].endswith(digests["aws_load_balancer_controller"])
    assert tags["cluster-autoscaler"].endswith(digests["cluster_autoscaler"])


def test_the_leaderworkerset_controller_is_pulled_by_digest_through_the_cache(project: Path) -> None:
    from infra.program import render_stack
    from sizing.catalog.lookup import load_catalog
    from sizing.planning.planner import plan_stack

    digests = fake_lock(project / "stacks" / "images.lock.json")
    stack = load_stack(project / "stacks" / "Pulumi.llama405b.yaml")  # a replica spans two nodes: LWS
    pins = resolve_pins(project / "stacks" / "Pulumi.llama405b.yaml", allow_unpinned=False)
    result = render_stack(stack, plan_stack(stack, load_catalog()), load_catalog(), pins)
    (lws,) = [r for r in result.resources if r.type == "kubernetes:helm.sh/v3:Release" and r.name == "leaderworkerset"]
    manager = lws.inputs["values"]["image"]["manager"]
    assert manager["repository"].endswith(".dkr.ecr.us-east-1.amazonaws.com/k8s/lws/lws")
    assert manager["tag"] == f"v0.10.0@{digests['leaderworkerset']}"


def test_the_fit_table_says_how_images_are_pinned(project: Path) -> None:
    from infra.fit.check import FitContext, check_deployable
    from sizing.catalog.lookup import load_catalog
    from sizing.planning.planner import plan_stack

    stack = load_stack(project / "stacks" / "Pulumi.dev.yaml")
    plan = plan_stack(stack, load_catalog())
    by_tag = ImagePins(digests={}, unpinned=("vllm", "router"), lock_file="stacks/images.lock.json")
    row = check_deployable(FitContext(stack, plan, load_catalog(), extra={"image_pins": by_tag})).rows[0]
    assert row["image pins"] == "by tag (allow_unpinned_images): vllm, router; llmcap images lock pins them"
    fake_lock(project / "stacks" / "images.lock.json")
    pins = resolve_pins("stacks/Pulumi.dev.yaml", allow_unpinned=False)
    row = check_deployable(FitContext(stack, plan, load_catalog(), extra={"image_pins": pins})).rows[0]
    assert row["image pins"] == "by digest (stacks/images.lock.json)"


def test_lock_path_is_beside_the_stack_files() -> None:
    assert lock_path("stacks/Pulumi.dev.yaml") == Path("stacks/images.lock.json")


def test_chart_image_tags_follow_the_pinned_chart_app_versions() -> None:
    doc = yaml.safe_load((ROOT / "infra" / "data" / "versions.yaml").read_text())
    for key, chart in doc["charts"].items():
        if "image" in chart:
            # the chart's appVersion where versions.yaml records it, else the release (LWS: chart = release)
            expected = str(chart.get("app_version") or chart["version"]).lstrip("v")
            assert chart["image"]["tag"].lstrip("v") == expected, key


def test_render_names_the_chart_images_not_yet_locked(project: Path) -> None:
    """Until a chart's sub-images are cached and locked, render says which charts in one line."""
    from infra.config import settings

    assert set(settings.charts_not_locked()) == {"nvidia_device_plugin", "keda", "kube_prometheus_stack",
                                                 "aws_efa_device_plugin"}
    # only the charts the stack installs: dev has no pool on EFA, so no EFA device plugin
    from infra.kubernetes.pulled_images import installed_chart_keys
    from sizing.planning.planner import plan_for

    installed = installed_chart_keys(plan_for(project / "stacks" / "Pulumi.dev.yaml"), "managed-node-groups")
    assert "aws_efa_device_plugin" not in installed
    note = ImagePins.charts_note(installed)
    assert note == ("warning: chart images not pinned by digest nor pulled through the cache yet: "
                    "nvidia-device-plugin, keda, kube-prometheus-stack (why: infra/data/versions.yaml "
                    "images_not_locked)")
    code, out = cli("render", "stacks/Pulumi.dev.yaml", "--out", "out")
    assert code == 0, out
    assert note in out.splitlines() and any(line.startswith("warning: images deployed by tag") for line in
                                            out.splitlines())
