"""Test helper: a real Prometheus server (Debian's `prometheus`, which `make system-deps`
installs) on a free loopback port, scraping the given targets every second, with its data in
a folder of the test's; always stopped, also on failure."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconciler.rollout.alarms import Reading
from reconciler.rollout.promql import instance
from reconciler.rollout.watch import AlarmWatch
from reconciler.spec.policy import Alarm
from tests.conftest import require_installed
from tests.engines.sim.sims import Sim, free_port, http_get, stop_process, wait_until
from tests.labs.sims import warm_sims

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
SCRAPE_S = 1
KEY = "chat/canary"  # the stage the labs' readings are kept under


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


@dataclass
class Lab:
    sims: tuple[Sim, Sim]
    prometheus: str
    started: float  # Unix time when Prometheus first saw both engines

    @property
    def targets(self) -> list[tuple[str, str]]:
        return [("vllm", s.url + "/metrics") for s in self.sims]


def ask(prometheus: str, promql: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"query": promql})
    status, body = http_get(f"{prometheus}/api/v1/query?{query}")
    assert status == 200, body
    result: list[dict[str, Any]] = json.loads(body)["data"]["result"]
    return result


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    logs = tmp_path_factory.mktemp("prometheus-lab")
    with warm_sims(logs, 2) as (one, two):
        targets = [instance(s.url) for s in (one, two)]
        with prometheus_process(targets, logs / "prometheus") as url:
            wait_until(
                lambda: {r["metric"]["instance"] for r in ask(url, "up == 1")} == set(targets),
                60,
                "Prometheus scraping both engines",
            )
            yield Lab((one, two), url, time.time())


def prometheus_reading(lab: Lab, alarm: Alarm, targets: list[tuple[str, str]]) -> Reading:
    watch = AlarmWatch({"alarm": alarm}, prometheus=lab.prometheus)
    now = time.time()
    watch.scrape(KEY, targets, now)
    [reading] = watch.readings(KEY, now)
    return reading


def seen(lab: Lab, alarm: Alarm, holds: Callable[[Reading], bool], what: str) -> Reading:
    """The Prometheus-mode reading once it `holds` (Prometheus scrapes every second; a
    loaded machine may take longer)."""

    def holding() -> Reading | None:
        reading = prometheus_reading(lab, alarm, lab.targets)
        return reading if holds(reading) else None

    return wait_until(holding, 60, what)


def scraped_since(lab: Lab, since: float) -> bool:
    """Every engine has a sample of its request counter scraped after `since`."""
    stamps = ask(lab.prometheus, "timestamp(http_requests_total)")
    latest: dict[str, float] = {}
    for r in stamps:
        at = r["metric"]["instance"]
        latest[at] = max(latest.get(at, 0.0), float(r["value"][1]))
    wanted = {instance(s.url) for s in lab.sims}
    return wanted <= latest.keys() and all(latest[i] > since for i in wanted)
