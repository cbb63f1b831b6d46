"""One run of a study's workload against a real simulator (`denv sim serve`): the figures of a
whole run, and a run that clearly misses the latency target stopped early, well before its
end, its figures taken from what had arrived."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reconciler.bench.trial import TrialEndpoint
from reconciler.bench.trial_plan import ProbeInfo
from reconciler.catalog.latency import parse_latency_target
from reconciler.fleet.observe import Transports
from reconciler.optimize.candidates import Run
from reconciler.optimize.trials import measure
from reconciler.optimize.workload import Workload, run_lines
from reconciler.spec.fleet import Fleet
from reconciler.spec.result import TrafficLine
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


def work(requests: int, target: str | None) -> Workload:
    lines = [
        TrafficLine(timestamp=0, input_length=300, output_length=8, hash_ids=[100 + i])
        for i in range(8)
    ]
    return Workload(
        lines=run_lines(lines, 16, requests), concurrency=16, goal="throughput",
        target=parse_latency_target(target) if target else None, gpu_hour=2.0,
    )  # fmt: skip


def test_a_whole_run_gives_the_goal_figure_and_the_target_verdict(sim: Sim) -> None:
    seen: list[tuple[int, int]] = []
    run = measure(
        endpoint(sim), work(48, "p99<60s"), fleet=FLEET, transports=Transports(),
        progress=lambda done, total: seen.append((done, total)),
    )  # fmt: skip
    assert not run.stopped_early and run.miss is None
    assert run.metrics.requests == 48 - 16  # a warm-up of one request a client
    assert run.goal == run.metrics.output_tok_s_per_gpu and run.goal and run.goal > 0
    assert seen[-1] == (48, 48)


def test_a_run_that_clearly_misses_stops_early(sim: Sim) -> None:
    looked: list[Run] = []

    def stop_early(partial: Run) -> bool:
        looked.append(partial)
        return partial.miss is not None

    run = measure(
        endpoint(sim), work(400, "p99<1ms"), fleet=FLEET, transports=Transports(),
        stop_early=stop_early,
    )  # fmt: skip
    assert run.stopped_early and run.miss is not None and "TTFT p99" in run.miss
    assert looked and (run.metrics.requests or 0) < 100  # far from the 400 it would send
