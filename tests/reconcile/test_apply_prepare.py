"""Apply prepares first: a unit's runtime is built on its host before the unit starts, and a
host that cannot prepare leaves its deployment exactly as it runs (nothing is stopped). A
small package from the registry at a pinned version stands in for an engine."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.engines.runtime import Need
from reconciler.engines.units import Probe, Unit
from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.launching import unit_digest
from reconciler.fleet.transport import LocalTransport
from reconciler.reconcile.apply import Applier, ApplyOptions
from reconciler.reconcile.desired import Desired, DesiredDeployment, DesiredUnit
from reconciler.reconcile.plan import ActionKind, plan
from reconciler.spec.loader import open_repo
from reconciler.spec.repo import Repo
from tests.conftest import ROOT
from tests.fleet.conftest import answers, free_port

HEAD = "0" * 40
LABELS = {"release": "r", "stage": "s", "fleet": "local", "revision": HEAD, "role": "aggregated"}


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    found = tmp_path / "denv-home"
    yield found
    agent = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": str(found)}))
    for unit in agent.units():
        agent.stop(unit.id, grace=1)


def desired(home: Path, port: int, version: str) -> Desired:
    python = f"{home}/engines/six-{version}/bin/python"
    unit = Unit(
        name="aggregated-0",
        role="aggregated",
        replica=0,
        node=0,
        engine="six",
        host="localhost",
        address="127.0.0.1",
        argv=[python, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        env={},
        port=port,
        gpus=0,
        gpu_indices=[],
        readiness=Probe(path="/", status=200),
    )
    need = Need(kind="venv", name=f"six-{version}", packages=(f"six=={version}",))
    wanted = DesiredUnit(
        id="r.s.local.aggregated-0",
        fleet="local",
        host="localhost",
        digest=unit_digest(unit),
        labels=LABELS,
        replica_gpus=0,
        unit=unit,
        need=need,
    )
    deployment = DesiredDeployment(
        release="r", stage="s", fleet="local", revision=HEAD, gpus=0, endpoint=None,
        units=(wanted,),
    )  # fmt: skip
    return Desired(head=HEAD, deployments=(deployment,))


def apply(repo: Repo, home: Path, wanted: Desired) -> list[str]:
    agent = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": str(home)}))
    observed = {"local": {"localhost": tuple(agent.units())}}
    drivers = Drivers(local_env={**os.environ, "DENV_HOME": str(home)})
    try:
        applier = Applier(repo, drivers, ApplyOptions(ready_timeout=30, drain_grace=1))
        report = applier.apply(plan(wanted, observed), wanted.deployments)
    finally:
        drivers.close()
    return report.errors


def test_the_runtime_is_prepared_before_the_unit_starts(home: Path) -> None:
    repo = open_repo(ROOT)
    port = free_port()
    assert apply(repo, home, desired(home, port, "1.16.0")) == []
    assert (home / "engines" / "six-1.16.0" / ".denv-complete").exists()
    assert answers(port)


def test_a_host_that_cannot_prepare_keeps_what_runs(home: Path) -> None:
    repo = open_repo(ROOT)
    port = free_port()
    assert apply(repo, home, desired(home, port, "1.16.0")) == []
    agent = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": str(home)}))
    [before] = agent.units()
    broken = desired(home, port, "0.0.1")  # no such release of six: pip fails
    actions = plan(broken, {"local": {"localhost": (before,)}}).actions
    assert [a.kind for a in actions] == [ActionKind.REPLACE]
    errors = apply(repo, home, broken)
    assert len(errors) == 1 and "prepare failed" in errors[0] and "six==0.0.1" in errors[0]
    [after] = agent.units()
    assert (after.pid, after.digest, after.alive) == (before.pid, before.digest, True)
    assert answers(port)
