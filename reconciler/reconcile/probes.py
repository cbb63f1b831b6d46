"""Adapter: HTTP checks of running units — readiness, requests in flight (from the engine's
Prometheus metrics), and a router's worker list (sglang-router's `/workers` API)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from reconciler.engines.units import Unit

TIMEOUT = 2.0  # seconds per HTTP call: a unit that takes longer is not ready


def base_url(unit: Unit) -> str | None:
    return f"http://{unit.address}:{unit.port}" if unit.port is not None else None


def _call(url: str, method: str = "GET", body: Any = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (OSError, ValueError):
        return 0, b""


def is_ready(unit: Unit) -> bool:
    """The unit's readiness probe passes (a unit without a probe or port: never checked)."""
    root = base_url(unit)
    if root is None or unit.readiness is None:
        return True
    status, _ = _call(root + unit.readiness.path)
    return status == unit.readiness.status


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    interval: float = 0.2,
    abort: Callable[[], bool] = lambda: False,
) -> bool:
    """Poll `check` until it holds (True) or `timeout` passes or `abort` says stop (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        if abort():
            return False
        time.sleep(interval)
    return check()


def in_flight(unit: Unit) -> float | None:
    """Requests the engine has taken and not answered yet — running, and queued where its
    metrics name a queue — from its metrics; None when unknown."""
    if unit.metrics is None or unit.metrics.running is None:
        return None
    url = f"http://{unit.address}:{unit.metrics.port}{unit.metrics.path}"
    return in_flight_at(url, unit.metrics.running, unit.metrics.waiting)


def in_flight_at(url: str, running: str, waiting: str | None) -> float | None:
    """in_flight, from the metrics at `url` and the names of its two gauges."""
    status, body = _call(url)
    if status != 200:
        return None
    wanted = {running, waiting} - {None}
    total = None
    for family in text_string_to_metric_families(body.decode("utf-8", "replace")):
        for sample in family.samples:
            if sample.name in wanted:
                total = (total or 0.0) + sample.value
    return total


def router_workers(router: Unit) -> dict[str, str] | None:
    """url -> worker id of the router's workers; None when the router does not answer."""
    root = base_url(router)
    return workers_at(root) if root is not None else None


def workers_at(root: str) -> dict[str, str] | None:
    """router_workers, of the router at `root` (http://address:port)."""
    status, body = _call(root + "/workers")
    if status != 200:
        return None
    try:
        listed = json.loads(body)["workers"]
        return {w["url"]: w["id"] for w in listed}
    except (ValueError, KeyError, TypeError):
        return None


def add_worker(router: Unit, url: str) -> bool:
    status, _ = _call(f"{base_url(router)}/workers", "POST", {"url": url})
    return status in (200, 201, 202)


def remove_worker(router: Unit, worker_id: str) -> bool:
    return remove_worker_at(f"{base_url(router)}", worker_id)


def remove_worker_at(root: str, worker_id: str) -> bool:
    quoted = urllib.parse.quote(worker_id, safe="")
    status, _ = _call(f"{root}/workers/{quoted}", "DELETE")
    return status in (200, 202, 204, 404)
