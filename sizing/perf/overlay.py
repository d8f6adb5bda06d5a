"""The local calibration overlay: measured corrections, per (GPU, engine, model), that later plans
apply on top of the bundled calibration. `llmcap calibrate` writes it; the planner reads it with
`load_overlay().goodput_scale(gpu, engine, model)` and puts the returned note in Plan.assumptions.

Location: $LLMCAP_CALIBRATION_OVERLAY, else $XDG_CONFIG_HOME/llmcap/calibration_overlay.json, else
~/.config/llmcap/calibration_overlay.json. A missing file is an empty overlay; a corrupt one is an
error (a silently dropped correction would under-size the next plan). The bundled data files under
sizing/data are never written. Imports only pydantic and the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sizing.errors import SpecError
from sizing.user_files import atomic_write_text

OVERLAY_SCHEMA_VERSION = 1
ENV_VAR = "LLMCAP_CALIBRATION_OVERLAY"
# The note starts with this (the planner writes it into the plan's assumptions as "calibration overlay:
# <note>"); the scale itself travels as Pool.goodput_scale, which `llmcap calibrate` divides out.
NOTE_PREFIX = "goodput × "


def overlay_path() -> Path:
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "llmcap" / "calibration_overlay.json"


class OverlayEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpu: str
    engine: str
    model: str  # Hugging Face id, as in Plan.model
    goodput_scale: float = Field(gt=0, le=100, allow_inf_nan=False)  # measured / predicted goodput per replica
    itl_p95_scale: float | None = Field(default=None, gt=0, allow_inf_nan=False)  # measured / predicted
    ttft_p95_scale: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    lower_bound: bool = False  # the sweep never left the SLO: true goodput is at least this
    measured_goodput_output_tokens_per_s_per_replica: float
    predicted_goodput_output_tokens_per_s_per_replica: float  # the bundled model's figure, no overlay
    precision: str = ""
    tensor_parallel: int = 0
    endpoint: str = ""
    source: str = ""  # the results file
    measured_at: str = ""  # ISO 8601

    def key(self) -> tuple[str, str, str]:
        return (self.gpu.lower(), self.engine.lower(), self.model.lower())


class Overlay(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = OVERLAY_SCHEMA_VERSION
    entries: list[OverlayEntry] = Field(default_factory=list)
    path: str = Field(default="", exclude=True)

    def entry(self, gpu: str, engine: str, model: str) -> OverlayEntry | None:
        k = (gpu.lower(), engine.lower(), model.lower())
        return next((e for e in self.entries if e.key() == k), None)

    def goodput_scale(self, gpu: str, engine: str, model: str) -> tuple[float, str] | None:
        """The factor to multiply predicted goodput per replica by, and the note for Plan.assumptions."""
        e = self.entry(gpu, engine, model)
        if e is None:
            return None
        bound = " (a lower bound: the bench never reached the SLO limit)" if e.lower_bound else ""
        note = (f"{NOTE_PREFIX}{e.goodput_scale:.3f} for {e.gpu}/{e.engine}/{e.model} from {self.path or 'overlay'}:"
                f" measured {e.measured_goodput_output_tokens_per_s_per_replica:,.0f} vs predicted "
                f"{e.predicted_goodput_output_tokens_per_s_per_replica:,.0f} output tokens/s per replica"
                f"{' at ' + e.endpoint if e.endpoint else ''}{' on ' + e.measured_at[:10] if e.measured_at else ''}"
                f"{bound}")
        return e.goodput_scale, note

    def upsert(self, entry: OverlayEntry) -> None:
        self.entries = [e for e in self.entries if e.key() != entry.key()] + [entry]

    def save(self, path: Path | None = None) -> Path:
        if path is not None:
            p = path
        else:
            p = Path(self.path) if self.path else overlay_path()
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(p, self.model_dump_json(indent=2) + "\n")
        self.path = str(p)
        return p


@contextmanager
def overlay_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock (fcntl.flock) on `<overlay>.lock` for a load-modify-save."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def update_overlay(entry: OverlayEntry, path: str | Path | None = None) -> tuple[Overlay, Path]:
    """Add or replace `entry` in the overlay at `path` (default overlay_path()) under the lock, so
    concurrent `llmcap calibrate` runs each keep their entry. Returns the saved overlay and its path."""
    p = Path(path) if path is not None else overlay_path()
    try:
        with overlay_lock(p):
            ov = load_overlay(p)
            ov.upsert(entry)
            ov.save(p)
    except OSError as e:
        raise SpecError(f"{p}: cannot write the calibration overlay ({e.__class__.__name__}: {e.strerror}); "
                        "it is unchanged") from None
    return ov, p


def load_overlay(path: str | Path | None = None) -> Overlay:
    """The overlay at `path` (default: overlay_path()); empty when the file does not exist."""
    p = Path(path) if path is not None else overlay_path()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Overlay(path=str(p))
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{p}: cannot read the calibration overlay ({e.__class__.__name__}); fix or delete it") \
            from None
    try:
        ov = Overlay.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        raise SpecError(f"{p}: not a calibration overlay ({'.'.join(str(x) for x in first['loc'])}: "
                        f"{first['msg']}); fix or delete it, or set ${ENV_VAR}") from None
    if ov.schema_version != OVERLAY_SCHEMA_VERSION:
        raise SpecError(f"{p}: overlay schema_version {ov.schema_version}; this llmcap reads {OVERLAY_SCHEMA_VERSION}")
    ov.path = str(p)
    return ov


def default_goodput_scale() -> Callable[[str, str, str], tuple[float, str] | None] | None:
    """The user's measured calibration overlay (llmcap calibrate), when there is one."""
    overlay = load_overlay()
    return overlay.goodput_scale if overlay else None
