"""Alarms judged on what clients get from the router, not only on what the engines saw: a
`denv sim serve` engine behind the real sglang-router, both scraped on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from reconciler.engines.units import Unit
from reconciler.reconcile import probes
from reconciler.rollout.watch import AlarmWatch, metrics_targets
from reconciler.spec.policy import Alarm
from tests.engines.sim.sims import (
    denv_router,
    engine_unit,
    free_port,
    require_sglang_router,
    sim_process,
    sim_spec,
    wait_until,
)
from tests.labs.sims import completion, routed, router_ready

require_sglang_router()

T0 = 1_800_000_000.0  # the watch's clock is passed in
ALARMS = {"errors-1pct": Alarm(metric="error_rate", max="1%", window="1m", min_requests=20)}


@contextmanager
def routed_sim(folder: Path) -> Iterator[tuple[str, Unit, list[tuple[str, str]]]]:
    """A simulator behind the real router: the router's URL, its unit, and the metrics
    targets (the engine's, then the router's)."""
    spec = sim_spec(time_scale=10.0)
    with sim_process(spec, folder) as sim:
        metrics = free_port()
        with routed([sim], spec, folder, router_ready, metrics) as url:
            router = denv_router([sim], spec, url, metrics)
            targets = metrics_targets([engine_unit(sim), router])
            assert targets[1] == ("sglang-router", f"http://127.0.0.1:{metrics}/metrics")
            yield url, router, targets


def test_router_only_5xx_fire_the_error_alarm(tmp_path: Path) -> None:
    """The router answers 503 (no worker left) while its engine, healthy, sees no request
    fail: the engines' error rate reads 0%, the router's fires the alarm."""
    with routed_sim(tmp_path) as (url, router, targets):
        watch, engines = AlarmWatch(ALARMS), AlarmWatch(ALARMS)
        watch.scrape("chat/canary", targets, T0)
        engines.scrape("chat/canary", targets[:1], T0)
        served = [completion(url) for _ in range(24)]
        assert served == [200] * 24
        listed = probes.router_workers(router) or {}
        assert [probes.remove_worker(router, worker) for worker in listed.values()] == [True]
        wait_until(lambda: not probes.router_workers(router), 10, "the worker to leave")
        refused = [completion(url) for _ in range(24)]
        assert set(refused) and all(status >= 500 for status in refused), refused
        watch.scrape("chat/canary", targets, T0 + 60)
        engines.scrape("chat/canary", targets[:1], T0 + 60)
        (errors,) = watch.readings("chat/canary", T0 + 60)
        (seen_by_engines,) = engines.readings("chat/canary", T0 + 60)
    assert seen_by_engines.value == 0 and seen_by_engines.requests == 24
    assert errors.firing and errors.at == "router", errors.describe()
    assert errors.value is not None and errors.value >= 0.4, errors.describe()
    assert " at the router (" in errors.describe()


def test_a_new_revision_starts_the_engines_windows_and_the_routers_go_on(tmp_path: Path) -> None:
    """What the router refused before a roll's first pass counts in the new revision's
    window (its baseline is the router's last point), and stays counted once every replica
    is ready; the engines' windows start again at each."""
    with routed_sim(tmp_path) as (url, router, targets):
        watch = AlarmWatch(ALARMS)
        watch.scrape("chat/canary", targets, T0)
        assert [completion(url) for _ in range(24)] == [200] * 24
        watch.scrape("chat/canary", targets, T0 + 20)
        listed = probes.router_workers(router) or {}
        assert [probes.remove_worker(router, worker) for worker in listed.values()] == [True]
        wait_until(lambda: not probes.router_workers(router), 10, "the worker to leave")
        refused = [completion(url) for _ in range(24)]
        assert all(status >= 500 for status in refused), refused
        watch.start_roll("chat/canary")
        watch.scrape("chat/canary", targets[1:], T0 + 40, T0 + 40, T0 + 40)
        (rolling,) = watch.readings("chat/canary", T0 + 40)
        watch.start_bake("chat/canary")
        watch.scrape("chat/canary", targets, T0 + 50, T0 + 50, T0 + 40)
        (ready,) = watch.readings("chat/canary", T0 + 50)
    for reading in (rolling, ready):
        assert reading.at == "router" and reading.firing, reading.describe()
        assert reading.value is not None
        assert round(reading.value * reading.requests) >= 24, reading.describe()
        assert reading.requests < 48, reading.describe()  # the 24 served before: A's window
