"""Runs of a study's workload against a real simulator (`denv sim serve`): the traffic open
loop at a speed, its goodput per GPU at that rate; a run that clearly misses the latency
target stopped early, well before its end; the capacity search's edge."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from reconciler.catalog.latency import parse_latency_target
from reconciler.fleet.drivers.registry import Drivers
from reconciler.optimize.candidates import Run
from reconciler.optimize.capacity import Ladder
from reconciler.optimize.trials import capacity, measure
from reconciler.optimize.workload import Workload
from reconciler.spec.fleet import Fleet
from reconciler.spec.result import TrafficLine
from reconciler.trials.deployment import TrialEndpoint
from reconciler.trials.plan import ProbeInfo
from tests.engines.sim.sims import Sim, sim_process, sim_spec

MODEL = "llama-3.1-8b"
# units={} : nothing for check_running to look at, so no fleet is needed
FLEET = Fleet(name="none", provider="test", hardware="h200", transport="local",
              hosts=[{"name": "h", "gpus": 1}])  # type: ignore[list-item]  # fmt: skip


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    # two sequences at a time, 4x real time: 16 clients queue, so TTFT grows with the run
    spec = sim_spec(time_scale=4.0, settings={"max_batch": 2})
    with sim_process(spec, tmp_path_factory.mktemp("trial-logs")) as server:
        yield server


def endpoint(sim: Sim) -> TrialEndpoint:
    return TrialEndpoint(
        trial="t", url=sim.url, model=MODEL, weights="w", engine="sim", units={}, hosts={},
        gpus=1, simulated=True, probe=ProbeInfo(), ready_s=0.0,
    )  # fmt: skip


def work(requests: int, target: str | None, run_s: float = 1.0) -> Workload:
    """8 requests a second, 300 tokens in and 8 out."""
    lines = [
        TrafficLine(timestamp=125 * i, input_length=300, output_length=8, hash_ids=[100 + i])
        for i in range(8)
    ]
    return Workload(
        lines=lines, goal="throughput", requests=requests, run_s=run_s,
        target=parse_latency_target(target) if target else None, gpu_hour=2.0,
    )  # fmt: skip


def test_a_whole_run_gives_goodput_per_gpu_at_its_rate(sim: Sim) -> None:
    seen: list[tuple[int, int]] = []
    run = measure(
        endpoint(sim), work(48, "p99<60s"), 2.0, fleet=FLEET, drivers=Drivers(),
        progress=lambda done, total: seen.append((done, total)),
    )  # fmt: skip
    assert not run.stopped_early and run.miss is None
    assert (run.speed, run.rate) == (2.0, 16.0)  # twice the traffic's 8 requests a second
    assert run.metrics.requests == 48 - 4  # a warm-up of a tenth
    assert run.served is not None and run.goal == round(run.served.goodput_rps, 4)
    assert 0 < run.goal <= 16.0 * 1.1  # what arrived, and met the target, per second
    assert seen[-1] == (48, 48)


def test_a_run_that_clearly_misses_stops_early(sim: Sim) -> None:
    run = measure(endpoint(sim), work(400, "p99<1ms"), 8.0, fleet=FLEET, drivers=Drivers())
    assert run.stopped_early and run.miss is not None and "TTFT p99" in run.miss
    assert (run.metrics.requests or 0) < 100  # far from the 400 it would send


def test_the_capacity_search_finds_the_edge_of_what_holds(sim: Sim) -> None:
    """Two sequences at a time: a few requests a second hold a TTFT p99 of 0.5 s; doubling
    the rate from there, one soon does not (the engine's queue, or what this machine can send
    on time); the search stops between the two."""
    events: list[tuple[str, float, int, int]] = []

    def progress(speed: float) -> Callable[[int, int], None]:
        return lambda done, total: events.append(("run", speed, done, total))

    def ended(speed: float, run: Run | None) -> None:
        assert run is not None  # none failed
        events.append(("ended", speed, run.metrics.requests or 0, int(run.stopped_early)))

    found = capacity(
        endpoint(sim), work(24, "p99<500ms", run_s=1.0), Ladder(max_runs=8),
        fleet=FLEET, drivers=Drivers(), progress=progress, ended=ended,
    )  # fmt: skip
    assert found.miss is None and found.speed is not None and found.tried
    # each run is told as it goes, in order: it starts (0 of its total), its answers come,
    # and it ends before the next one starts, stopped early or not
    runs = [e for e in events if e[0] == "ended"]
    assert [e[1] for e in runs] == [p.speed for p in found.tried]
    at = 0
    for speed in [p.speed for p in found.tried]:
        end = events.index(next(e for e in runs if e[1] == speed), at)
        mine = events[at:end]
        assert mine and mine[0][:3] == ("run", speed, 0)
        assert all(e[:2] == ("run", speed) for e in mine)
        at = end + 1
    assert at == len(events)
    held = [p.speed for p in found.tried if p.miss is None]
    missed = [p.speed for p in found.tried if p.miss is not None]
    assert held and missed and found.speed == max(held) < min(missed)
    assert found.rate == pytest.approx(8.0 * found.speed, rel=1e-3)


def test_a_short_run_over_a_sparse_stretch_is_not_the_client_falling_behind(sim: Sim) -> None:
    """The run replays the traffic's first 24 requests, two a second, while the whole traffic
    averages about four: sent on schedule, the load generator kept up."""
    sparse = [TrafficLine(timestamp=500 * i, input_length=300, output_length=8, hash_ids=[i])
              for i in range(24)]  # fmt: skip
    dense = [TrafficLine(timestamp=11_500 + 20 * i, input_length=300, output_length=8,
                         hash_ids=[100 + i]) for i in range(1, 25)]  # fmt: skip
    bursty = Workload(lines=sparse + dense, goal="throughput", requests=24, run_s=1.0)
    assert bursty.rate(4.0) > 14  # the traffic's mean, four times over
    run = measure(endpoint(sim), bursty, 4.0, fleet=FLEET, drivers=Drivers())
    assert run.miss is None, run.miss
