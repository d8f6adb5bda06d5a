"""The design document in a real browser: headless Chromium (Debian's `chromium`, installed here with
apt-get where missing and the test runs as root, else skipped with the reason) renders design.html to a
screenshot that is not blank and to a DOM that holds every section, and `llmcap report` prints the
PDF with it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizing.cli import app
from sizing.cli.report_cmd import find_chromium
from sizing.perf.overlay import ENV_VAR
from tests.html_checks import parse

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "stacks" / "Pulumi.dev.yaml"
SECTIONS = ["summary", "requirements", "capacity", "scale", "arithmetic", "cost", "operations", "rollout",
            "assumptions", "model-error"]
BROWSER_TIMEOUT_S = 180  # a hang guard, far above the few seconds a render takes

# slow: starts a browser four times (and installs one with apt-get where missing), some 30 s on two cores
pytestmark = pytest.mark.slow


def chromium() -> str:
    found = find_chromium()
    if found:
        return found
    if not shutil.which("apt-get") or os.geteuid() != 0:
        pytest.skip("no Chromium, and apt-get as root is not available to install it (apt-get install chromium)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    # timeouts: hang guards for a download of some 100 MB
    r = subprocess.run(install, capture_output=True, text=True, timeout=900, check=False, env=env)
    if r.returncode != 0:  # a fresh machine's package lists may be missing or stale
        subprocess.run(["apt-get", "update"], capture_output=True, timeout=600, check=False, env=env)
        r = subprocess.run(install, capture_output=True, text=True, timeout=900, check=False, env=env)
    found = find_chromium()
    if not found:
        pytest.skip(f"apt-get install chromium failed (exit {r.returncode}): {(r.stderr or r.stdout)[-200:]}")
    return found


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    browser = chromium()
    d = tmp_path_factory.mktemp("chromium")
    mp = pytest.MonkeyPatch()
    mp.setenv(ENV_VAR, str(d / "no-overlay.json"))
    try:
        r = CliRunner().invoke(app, ["report", str(DEV), "--out", str(d / "doc")], env={"COLUMNS": "200"})
    finally:
        mp.undo()
    assert r.exit_code == 0, r.stdout + r.stderr
    assert f"pdf: printed by {browser}" in r.stdout
    return d / "doc", browser


def _browser(browser: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S, check=False)


def test_screenshot_is_not_blank(doc: tuple[Path, str], tmp_path: Path) -> None:
    import matplotlib.image as mpimg

    out, browser = doc
    png = tmp_path / "shot.png"
    r = _browser(browser, "--window-size=1280,2400", f"--screenshot={png}", (out / "design.html").as_uri())
    assert png.is_file(), r.stderr[-500:]
    img = mpimg.imread(png)[:, :, :3]
    ink = (img.mean(axis=2) < 0.85).mean()  # share of pixels darker than the page
    assert img.std() > 0.05 and ink > 0.02, (img.std(), ink)


def test_rendered_dom_holds_every_section(doc: tuple[Path, str]) -> None:
    out, browser = doc
    r = _browser(browser, "--dump-dom", (out / "design.html").as_uri())
    assert r.returncode == 0, r.stderr[-500:]
    assert parse(r.stdout).section_ids == SECTIONS


def test_pdf_is_printed_from_the_html(doc: tuple[Path, str]) -> None:
    out, _ = doc
    pdf = (out / "design.pdf").read_bytes()
    assert pdf.startswith(b"%PDF-") and pdf.count(b"/Type /Page") - pdf.count(b"/Type /Pages") >= 3
