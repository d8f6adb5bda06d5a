"""The image lock (issue 32): each pinned image tag's digest, read from the registry by `llmcap images lock`,
in `images.lock.json` beside the stack files (`stacks/images.lock.json`), reviewed in git like the
saved plans. `llmcap render` and the Pulumi program deploy the locked digests (`<repo>:<tag>@sha256:...`);
without a digest for every image they stop with one line naming `llmcap images lock`, unless the stack
sets `llmcap:deployment.allow_unpinned_images: true`, in which case tags are deployed and the render's
warnings and the fit table say so.

One lock for the folder, not one per stack: every stack deploys the same pins (infra/data/versions.yaml),
and a pull-through cache or mirror serves the upstream manifest unchanged, so its digest is the same
through any of them. An entry applies only while its `reference` is the image versions.yaml pins now: a
bumped tag needs a new lock.

A digest is a fact from the registry, never typed: only `write_lock` (from `oci_registry.resolve_digest`)
writes this file. Pure: no pulumi import.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infra.config import settings
from sizing.errors import SpecError
from sizing.user_files import atomic_write_text, read_user_file

LOCK_FILE = "images.lock.json"
LOCK_VERSION = 1
OPT_OUT = "llmcap:deployment.allow_unpinned_images"


class ImageLockError(SpecError):
    """No digest for an image the deployment runs, or an unreadable lock (exit 2)."""


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LockEntry(_M):
    reference: str  # the upstream reference locked, <registry>/<path>:<tag>
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    resolved_from: str  # the registry API the digest was read from
    as_of: str  # the date (UTC) it was read


class ImageLock(_M):
    lock_version: int = LOCK_VERSION
    images: dict[str, LockEntry]

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


def lock_path(stack_file: str | Path) -> Path:
    """`stacks/Pulumi.dev.yaml` -> `stacks/images.lock.json`."""
    return Path(stack_file).with_name(LOCK_FILE)


def upstream_reference(img: settings.Image) -> str:
    return f"{img.registry}/{img.image}:{img.tag}"


def deployed_images() -> dict[str, settings.Image]:
    """Every image the deployment runs that llmcap pins, by key: its own (versions.yaml `images`: vLLM,
    router, the copy Job's AWS CLI, the compose target's Prometheus) and the add-on charts' images
    that it routes through the registry cache (versions.yaml `charts.<key>.image`)."""
    out = {k: replace(settings.image(k), digest=None) for k in settings.image_keys()}
    for key in settings.chart_keys():
        img = settings.chart_image_pin(key)
        if img is not None:
            out[key] = img
    return out


def read_lock(path: Path) -> ImageLock | None:
    if not path.exists():
        return None
    text = read_user_file(path, "image lock", "write one with llmcap images lock STACK_FILE")
    try:
        return ImageLock.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        raise ImageLockError(f"{path}: not an image lock ({'.'.join(str(x) for x in first['loc'])}: "
                             f"{first['msg']}): run llmcap images lock again") from None


def write_lock(lock: ImageLock, path: Path) -> Path:
    atomic_write_text(path, lock.to_json(), usual_mode=True)
    return path


@dataclass(frozen=True)
class ImagePins:
    """What the deployment pulls: each image key's digest where the lock has one for today's pin."""

    digests: dict[str, str]
    unpinned: tuple[str, ...]  # keys deployed by tag (only with the opt-out)
    lock_file: str

    def image(self, key: str) -> settings.Image:
        """The pinned image of `key` (versions.yaml or a chart's), with its locked digest."""
        img = deployed_images()[key]
        return replace(img, digest=self.digests.get(key))

    def warning(self, keys: tuple[str, ...] | None = None) -> str:
        """One line when some images (of `keys`, default all) go by tag, else ""."""
        unpinned = [k for k in self.unpinned if keys is None or k in keys]
        if not unpinned:
            return ""
        return (f"warning: images deployed by tag, not digest ({OPT_OUT}: true): {', '.join(unpinned)}; "
                f"pin them with llmcap images lock (writes {self.lock_file})")

    @staticmethod
    def charts_note(installed: tuple[str, ...] | None = None) -> str:
        """One line naming the add-on charts (of `installed`, the charts the stack installs; None: all) whose
        images are neither cached nor locked yet."""
        charts = [k for k in settings.charts_not_locked() if installed is None or k in installed]
        if not charts:
            return ""
        return (f"warning: chart images not pinned by digest nor pulled through the cache yet: "
                f"{', '.join(k.replace('_', '-') for k in charts)} (why: infra/data/versions.yaml "
                f"images_not_locked)")



def locked_digests(lock: ImageLock | None) -> tuple[dict[str, str], list[str]]:
    """Each deployed image's digest where the lock has one for today's pin; the keys it has none for."""
    digests: dict[str, str] = {}
    missing: list[str] = []
    for key, img in deployed_images().items():
        entry = lock.images.get(key) if lock else None
        if entry is not None and entry.reference == upstream_reference(img):
            digests[key] = entry.digest
        else:
            missing.append(key)
    return digests, missing


def resolve_pins(stack_file: str | Path, allow_unpinned: bool, pulled: tuple[str, ...] | None = None) -> ImagePins:
    """The digests the stack deploys, from the lock beside its stack file; one line when an image has
    none (no lock, or a lock for another tag) and the stack has not opted out. `pulled`: the image keys this
    stack's cluster really pulls (infra/kubernetes/engines.py pulled_image_keys); only those count as unpinned,
    so neither the refusal nor the warning names an image the stack never runs (None: every image)."""
    path = lock_path(stack_file)
    shown = path.as_posix()
    digests, missing = locked_digests(read_lock(path))
    missing = [k for k in missing if pulled is None or k in pulled]
    if missing and not allow_unpinned:
        why = "no image lock" if not path.exists() else f"no digest for today's pin of {', '.join(missing)}"
        raise ImageLockError(f"{shown}: {why}: run llmcap images lock {Path(stack_file).as_posix()} where the "
                             f"registry is reachable and commit it (or set {OPT_OUT}: true to deploy tags)")
    return ImagePins(digests=digests, unpinned=tuple(missing), lock_file=shown)
