"""Test helper: a real Prometheus server (Debian's `prometheus`, which `make system-deps`
installs) on a free loopback port, scraping the given targets every second, with its data in
a folder of the test's; always stopped, also on failure."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.conftest import require_installed
from tests.engines.sim.sims import free_port, http_get, stop_process, wait_until

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
SCRAPE_S = 1


@contextlib.contextmanager
def prometheus_process(targets: Sequence[str], folder: Path) -> Iterator[str]:
    """Prometheus scraping `targets` (host:port, /metrics) every second; yields its URL once
    it is ready."""
    require_installed(os.access(PROMETHEUS, os.X_OK), "Prometheus")
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "prometheus.yml"
    listed = ", ".join(f'"{t}"' for t in targets)
    config.write_text(
        f"global: {{ scrape_interval: {SCRAPE_S}s, evaluation_interval: {SCRAPE_S}s }}\n"
        f"scrape_configs:\n  - job_name: engines\n    static_configs: [{{ targets: [{listed}] }}]\n"
    )
    port = free_port()
    argv = [
        PROMETHEUS,
        f"--config.file={config}",
        f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    log = folder / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: proc.poll() is not None or http_get(url + "/-/ready", 2)[0] == 200,
            60,
            f"prometheus at {url}",
        )
        if proc.poll() is not None:
            pytest.fail(f"prometheus exited: {log.read_text()[-2000:]}")
        yield url
    finally:
        stop_process(proc)
