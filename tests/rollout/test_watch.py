"""Watching alarms for real: a `denv sim serve` process scraped on loopback while the openai
client sends traffic, faults injected through /admin/faults. Prometheus mode, against a real
Prometheus, is in test_prometheus.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from reconciler.engines.units import Metrics, Unit
from reconciler.rollout.alarms import Reading
from reconciler.rollout.watch import AlarmWatch, metrics_targets
from reconciler.spec.policy import Alarm, AlarmsFile
from tests.engines.sim.sims import Sim, free_port
from tests.labs.sims import faults, traffic, warm_sims

KEY = "chat/canary"
T0 = 1_800_000_000.0  # the watch's clock is passed in: windows are 60 s of it
ALARMS = {
    "ttft-p99-250ms": Alarm(metric="ttft", stat="p99", max="250ms", window="1m", min_requests=20),
    "errors-1pct": Alarm(metric="error_rate", max="1%", window="1m", min_requests=20),
}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    logs = tmp_path_factory.mktemp("sim-logs")
    with warm_sims(logs) as (running,):
        yield running


def by_name(readings: list[Reading]) -> dict[str, Reading]:
    return {r.name: r for r in readings}


def reloaded(watch: AlarmWatch) -> AlarmWatch:
    """The watch as the next `denv reconcile --once` run gets it back from the lease note."""
    return AlarmWatch(ALARMS, state=json.loads(json.dumps(watch.state())))


def test_a_latency_spike_fires_ttft_p99_in_the_next_window_and_not_before(sim: Sim) -> None:
    targets = [("sim", sim.url + "/metrics")]
    watch = AlarmWatch(ALARMS)
    watch.scrape(KEY, targets, T0)
    assert traffic(sim, 24) == [200] * 24
    watch = reloaded(watch)
    watch.scrape(KEY, targets, T0 + 60)
    healthy = by_name(watch.readings(KEY, T0 + 60))
    assert healthy["ttft-p99-250ms"].requests == 24
    assert not healthy["ttft-p99-250ms"].firing, healthy["ttft-p99-250ms"].describe()
    assert healthy["ttft-p99-250ms"].value is not None
    assert healthy["errors-1pct"].value == 0 and not healthy["errors-1pct"].firing

    faults(sim, spike_ms=5000)  # +0.5 s a step at time scale 10
    try:
        assert traffic(sim, 24) == [200] * 24
    finally:
        faults(sim, spike_ms=0)
    watch = reloaded(watch)
    watch.scrape(KEY, targets, T0 + 120)
    spiked = by_name(watch.readings(KEY, T0 + 120))
    ttft = spiked["ttft-p99-250ms"]
    assert ttft.firing and ttft.value is not None and ttft.value >= 0.5, ttft.describe()
    assert ttft.requests == 24 and ttft.covered == 60  # this window only, not the healthy one
    assert (
        ttft.describe().startswith("ttft p99 ") and "> 250 ms (24 requests, 1m)" in ttft.describe()
    )
    assert not spiked["errors-1pct"].firing


def test_an_error_rate_fault_fires_the_error_alarm(sim: Sim) -> None:
    targets, key = [("sim", sim.url + "/metrics")], "chat/errors"
    watch = AlarmWatch(ALARMS)
    watch.scrape(key, targets, T0)
    faults(sim, error_rate=0.5, seed=3)
    try:
        statuses = traffic(sim, 40)
    finally:
        faults(sim, error_rate=0.0)
    failed = statuses.count(500)
    assert 0 < failed < 40 and statuses.count(200) == 40 - failed
    watch.scrape(key, targets, T0 + 60)
    errors = by_name(watch.readings(key, T0 + 60))["errors-1pct"]
    assert errors.requests == 40 and errors.firing
    assert errors.value == pytest.approx(failed / 40)


def test_an_engine_that_does_not_answer_is_named_and_never_fires(sim: Sim) -> None:
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    targets, key = [("sim", sim.url + "/metrics"), ("sim", dead)], "chat/partial"
    watch = AlarmWatch(ALARMS, timeout=5.0)
    watch.scrape(key, targets, T0)
    assert traffic(sim, 20) == [200] * 20
    watch.scrape(key, targets, T0 + 60)
    for reading in watch.readings(key, T0 + 60):
        assert reading.missing == (dead,) and not reading.firing
        assert reading.requests == 20 and reading.value is not None
    alone = AlarmWatch(ALARMS, timeout=5.0)
    alone.scrape(key, [("sim", dead)], T0)
    alone.scrape(key, [("sim", dead)], T0 + 60)
    for reading in alone.readings(key, T0 + 60):
        assert reading.value is None and not reading.firing
        assert "not judged, no engine answered" in reading.describe()


def test_metrics_targets_are_the_engines_and_the_routers_whose_series_are_known() -> None:
    def unit(name: str, role: str, engine: str, port: int) -> Unit:
        metrics = Metrics(port=port + 1 if role == "router" else port)
        return Unit.model_validate(
            {
                "name": name, "role": role, "replica": 0, "node": 0, "engine": engine,
                "host": "h1", "address": "10.0.0.5", "argv": ["x"], "env": {}, "port": port,
                "gpus": 1, "gpu_indices": [0], "metrics": metrics,
            }
        )  # fmt: skip

    units = [unit("r0", "aggregated", "vllm", 8000), unit("router", "router", "vllm-router", 8100)]
    units.append(unit("router", "router", "sglang-router", 8200))
    assert metrics_targets(units) == [
        ("vllm", "http://10.0.0.5:8000/metrics"),
        ("sglang-router", "http://10.0.0.5:8201/metrics"),
    ]


# -- Prometheus mode (against a real Prometheus: test_prometheus.py) -----------------------


def test_alarms_file_names_its_prometheus_server() -> None:
    parsed = AlarmsFile.model_validate({"alarms": {}, "prometheus": {"url": "http://prom:9090"}})
    assert parsed.prometheus is not None and parsed.prometheus.url == "http://prom:9090"
    with pytest.raises(ValidationError):
        AlarmsFile.model_validate({"alarms": {}, "prometheus": {"url": "prom:9090"}})
