"""Test helper: a real PostgreSQL server (Debian's `postgresql`, which `make system-deps`
installs) on a free loopback port, its cluster in a fresh folder; always stopped and removed,
also on failure. PostgreSQL refuses to run as root: under root it runs as `postgres`."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import require_installed
from tests.engines.sim.sims import free_port, stop_process, wait_until

BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))


def require_postgres() -> Path:
    """The server's bin folder; skipped where PostgreSQL is missing, except in CI."""
    require_installed(bool(BIN) and os.access(Path(BIN[-1]) / "postgres", os.X_OK), "PostgreSQL")
    return Path(BIN[-1])


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """A SQLAlchemy URL (no driver named: denv picks psycopg) of an empty server."""
    bin_dir = require_postgres()
    folder = Path(tempfile.mkdtemp(prefix="denv-pg-"))  # outside root's private tmp folders
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    data, port = folder / "data", free_port()
    initdb = [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]
    done = subprocess.run(
        _as_server_user([*initdb, "--no-sync"]), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    log = (folder / "server.log").open("wb")
    server = subprocess.Popen(
        _as_server_user(
            [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(folder),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]
        ),
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    ready = [str(bin_dir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]
    try:
        wait_until(
            lambda: server.poll() is not None or subprocess.run(ready, timeout=10).returncode == 0,
            60,
            "PostgreSQL accepting connections",
        )
        assert server.poll() is None, (folder / "server.log").read_text()
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        stop_process(server)  # SIGTERM: a smart shutdown, and the clients are gone
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
