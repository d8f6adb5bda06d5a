"""`catalog refresh` takes a lock per cache (issue 27, item 7): two refreshes of different regions each read
the cache, fetched, and wrote back their merge, so the later one reverted the earlier one's region to old
data. Now the whole read-fetch-write holds the cache's flock; a second refresh waits (then says who holds
it), and a holder killed with -9 leaves no stale lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

aws = pytest.importorskip("sizing.adapters.aws")

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
os.pwrite(fd, str(os.getpid()).encode(), 0)
print("held", flush=True)
time.sleep(60)
"""


def test_a_second_refresh_of_the_same_cache_waits_for_the_first(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "catalog"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / ".catalog.lock")], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(aws, "LOCK_WAIT_S", 0.3)
        with pytest.raises(aws.AwsDataError, match=f"another catalog refresh of .* is running \\(pid {holder.pid}\\)"):
            # the lock comes before any fetch: no client is touched while another refresh runs
            aws.refresh_catalog(["us-east-1"], out, clients=None, catalog=None)  # type: ignore[arg-type]
        assert not out.exists()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    start = time.monotonic()
    with aws.cache_lock(out, wait_s=0.0):  # a holder killed with -9 leaves no stale lock
        pass
    assert time.monotonic() - start < 5.0  # hang guard only
