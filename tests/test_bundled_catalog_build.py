"""Issue 28 (cap5): the bundled catalog is reproducible. `python scripts/build_bundled_catalog.py` over
../shared/reference (and the pinned moto's offering files) writes sizing/data/{gpus,instances,prices,offerings,
models,api_prices,platform_prices}.csv and infra/data/efa_network_cards.csv byte for byte as committed: no column
may carry the day the build ran (offerings.csv's `as_of` once did, so every rebuild rewrote all its rows)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = next((d / "shared" / "reference" for d in (ROOT.parent, ROOT.parent.parent)
                  if (d / "shared" / "reference" / "aws_gpu_instances.csv").is_file()), None)


def _build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_bundled_catalog",
                                                  ROOT / "scripts" / "build_bundled_catalog.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(REFERENCE is None,
                    reason="../shared/reference is not here (a clone alone): nothing to rebuild from")
def test_the_build_reproduces_every_committed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    mod = _build_module()
    monkeypatch.setattr(mod, "DATA", tmp_path / "sizing")
    monkeypatch.setattr(mod, "INFRA_DATA", tmp_path / "infra")
    (tmp_path / "infra").mkdir()
    assert mod.main(["--reference", str(REFERENCE)]) == 0
    written = {p.relative_to(tmp_path): p for p in tmp_path.rglob("*.csv")}
    assert len(written) == 8
    differ = [str(rel) for rel, p in sorted(written.items())
              if p.read_bytes() != (ROOT / rel.parts[0] / "data" / rel.name).read_bytes()]
    assert differ == []


def test_offerings_are_dated_by_the_moto_release_not_the_build_day() -> None:
    """The `as_of` of an offering row is the date of the moto release whose data it copies (a fact of that
    release), so a rebuild on another day writes the same file."""
    mod = _build_module()
    import moto

    assert mod.moto_data_date(moto.__version__) == "2026-10-27"
    rows = (ROOT / "sizing" / "data" / "offerings.csv").read_text().splitlines()[1:]
    assert {r.rsplit(",", 1)[1] for r in rows} == {"2026-10-27"}


def test_an_unknown_moto_release_is_refused_in_one_line() -> None:
    mod = _build_module()
    with pytest.raises(SystemExit) as e:
        mod.moto_data_date("9.9.9")
    msg = str(e.value)
    assert "\n" not in msg and "moto 9.9.9" in msg and "MOTO_RELEASE_DATES" in msg
