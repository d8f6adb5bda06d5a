"""`llmcap images lock STACK_FILE`: read each pinned image tag's digest from the registry and write the
image lock beside the stack files (stacks/images.lock.json, infra/config/image_lock.py), which `llmcap render`
and `pulumi up` deploy. infra/ is imported inside the command only."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import typer

from sizing.cli.common import guarded

images_app = typer.Typer(help="Container images: pin every image the deployment runs by its digest.",
                         no_args_is_help=True)


@images_app.command("lock")
@guarded
def images_lock(
    stack_file: Path = typer.Argument(..., help="stacks/Pulumi.<env>.yaml: its image_registry (else the "
                                      "upstream registries) is asked; the lock goes beside it"),
) -> None:
    """Resolve each pinned image tag to its digest (OCI distribution API) and write images.lock.json
    beside the stack file, atomically; nothing is written unless every image resolves."""
    from infra.config.image_lock import ImageLock, LockEntry, deployed_images, lock_path, upstream_reference, write_lock
    from infra.config.oci_registry import RegistryError, resolve_digest
    from infra.config.registry import api_location
    from sizing.errors import SpecError
    from sizing.stack import load_stack

    stack = load_stack(stack_file)
    today = datetime.now(UTC).date().isoformat()
    entries: dict[str, LockEntry] = {}
    for key, img in deployed_images().items():
        host, name = api_location(img, stack.deployment.image_registry)
        try:
            got = resolve_digest(host, name, img.tag)
        except RegistryError as e:
            raise SpecError(f"{key}: {e}; nothing written") from None
        entries[key] = LockEntry(reference=upstream_reference(img), digest=got.digest, resolved_from=got.api,
                                 as_of=today)
        typer.echo(f"{key:<30} {upstream_reference(img):<60} {got.digest}")
    path = write_lock(ImageLock(images=entries), lock_path(stack_file))
    typer.echo(f"wrote {path.as_posix()}: review it with git diff; render and pulumi up deploy these digests")
