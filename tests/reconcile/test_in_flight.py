"""A replica's requests in flight, as a drain waits for them (reconcile/probes.in_flight): those
it runs and those queued in it alike — a stream queued in an engine that stops is cut as
surely as a running one. A simulator on loopback that runs one request at a time, three
requests sent to it."""

from __future__ import annotations

import threading
from pathlib import Path

from reconciler.engines.sim.argv import RUNNING, WAITING
from reconciler.engines.units import Metrics, Unit
from reconciler.reconcile import probes
from tests.engines.sim.sims import http_post, sim_process, sim_spec
from tests.fleet.conftest import wait_for


def test_queued_requests_are_in_flight(tmp_path: Path) -> None:
    spec = sim_spec(settings={"max_batch": 1}, time_scale=1.0)
    with sim_process(spec, tmp_path) as sim:
        port = int(sim.url.rsplit(":", 1)[1])
        unit = Unit(
            name="aggregated-0", role="aggregated", replica=0, node=0, engine="sim",
            host="localhost", address="127.0.0.1", argv=[], env={}, port=port, gpus=1,
            gpu_indices=[0], metrics=Metrics(port=port, running=RUNNING, waiting=WAITING),
        )  # fmt: skip
        assert probes.in_flight(unit) == 0
        body = {"model": "llama-3.1-8b", "prompt": "hello", "max_tokens": 400}
        sent = [
            threading.Thread(target=http_post, args=(f"{sim.url}/v1/completions", body, 120))
            for _ in range(3)
        ]
        for thread in sent:
            thread.start()
        wait_for(lambda: probes.in_flight(unit) == 3, timeout=60, what="3 requests in flight")
        running_only = unit.model_copy(update={"metrics": Metrics(port=port, running=RUNNING)})
        assert probes.in_flight(running_only) == 1  # what a drain waited for before
        for thread in sent:
            thread.join(timeout=180)
        assert probes.in_flight(unit) == 0
