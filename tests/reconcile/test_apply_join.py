"""A replica serves as soon as it is ready, not once the last one is: on the local fleet (the
real agent), the real sglang-router starts beside two simulator engines and takes the first
while the second still loads (its /health says 503 until the test ends its warm-up); the
pass ends once the router serves both."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.engines.placement import Placement, RouterSlot
from reconciler.engines.router import router_unit
from reconciler.engines.units import EngineContext, Probe, Unit
from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.launching import unit_digest
from reconciler.fleet.transport import LocalTransport
from reconciler.reconcile import probes
from reconciler.reconcile.apply import Applier, ApplyOptions, ApplyReport
from reconciler.reconcile.desired import Desired, DesiredDeployment, DesiredUnit
from reconciler.reconcile.plan import plan
from reconciler.spec.loader import open_repo
from tests.conftest import ROOT
from tests.engines.sim.sims import (
    free_port,
    http_post,
    require_sglang_router,
    sim_spec,
    wait_until,
)

require_sglang_router()

HEAD = "0" * 40
LOADING_S = "600"  # the second engine's warm-up: until the test ends it


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    found = tmp_path / "denv-home"
    yield found
    agent = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": str(found)}))
    for unit in agent.units():  # never leave a process behind, also when the test failed
        agent.stop(unit.id, grace=1)


def engine(replica: int, *flags: str) -> Unit:
    """A simulator engine on GPU `replica`, ready once its /health says so."""
    port = free_port()
    argv = [sys.executable, "-m", "reconciler", "sim", "serve", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--spec-json", sim_spec().model_dump_json(), *flags]
    return Unit(
        name=f"aggregated-{replica}", role="aggregated", replica=replica, node=0, engine="sim",
        host="localhost", address="127.0.0.1", argv=argv, env={}, port=port, gpus=1,
        gpu_indices=[replica], readiness=Probe(path="/health", status=200),
    )  # fmt: skip


def router(engines: list[Unit], hf_home: Path) -> Unit:
    """The router denv makes for them; it looks up a tokenizer on the Hugging Face hub: a
    closed loopback port, so no test traffic leaves the machine."""
    slot = RouterSlot(host="localhost", address="127.0.0.1", port=free_port())
    placement = Placement(fleet="local", slots=[], router=slot)
    context = EngineContext(hardware=sim_spec().hardware, engine_python=sys.executable)
    unit = router_unit("sim", engines, placement, context)
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(hf_home)}
    return unit.model_copy(update={"env": env})


def deployment(units: list[Unit]) -> DesiredDeployment:
    labels = {"release": "r", "stage": "s", "fleet": "local", "revision": HEAD}
    wanted = tuple(
        DesiredUnit(
            id=f"r.s.local.{unit.name}",
            fleet="local",
            host="localhost",
            digest=unit_digest(unit),
            labels={**labels, "role": unit.role},
            replica_gpus=unit.gpus,
            unit=unit,
        )
        for unit in units
    )
    return DesiredDeployment(
        release="r", stage="s", fleet="local", revision=HEAD, gpus=2, endpoint=None,
        units=wanted,
    )  # fmt: skip


def warmed_up(unit: Unit) -> bool:
    """Its warm-up ended now (False while the simulator does not answer yet)."""
    try:
        return http_post(f"{probes.base_url(unit)}/admin/faults", {"warmup_s": 0})[0] == 200
    except OSError:
        return False


def test_a_replica_serves_behind_its_router_while_another_still_loads(
    home: Path, tmp_path: Path
) -> None:
    first, loading = engine(0), engine(1, "--fault-warmup-s", LOADING_S)
    front = router([first, loading], tmp_path / "hf")
    wanted = Desired(head=HEAD, deployments=(deployment([first, loading, front]),))
    drivers = Drivers(local_env={**os.environ, "DENV_HOME": str(home)})
    applier = Applier(open_repo(ROOT), drivers, ApplyOptions(ready_timeout=120, drain_grace=1))
    reports: list[ApplyReport] = []
    apply = threading.Thread(
        target=lambda: reports.append(applier.apply(plan(wanted, {}), wanted.deployments))
    )
    apply.start()
    try:
        wait_until(
            lambda: set(probes.router_workers(front) or ()) == {probes.base_url(first)},
            60,
            "the router to serve the first replica",
        )
        assert not probes.is_ready(loading)  # the pass still waits for it
    finally:
        wait_until(lambda: warmed_up(loading), 60, "the second engine's warm-up to end")
        apply.join(timeout=120)
        drivers.close()
    [report] = reports
    assert report.errors == []
    assert report.done == {"start": 3}  # a replica's join is part of its start
    served = {probes.base_url(first), probes.base_url(loading)}
    assert set(probes.router_workers(front) or ()) == served
    assert probes.is_ready(front)
