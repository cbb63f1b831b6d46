"""The fleet driver seam: a third kind of fleet plugs in by one entry in the drivers' dict.
A toy driver keeps its units in memory (launching starts no process); the reconciler
observes the fleet, places the release with the toy's own rules (address, home, python),
launches through it, and the next look finds what it launched and plans nothing more."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reconciler.fleet.drivers.base import DriverKind
from reconciler.fleet.drivers.registry import DRIVERS, Drivers
from reconciler.fleet.model.observed import FleetObservation, Gpu, HostObservation, UnitRecord
from reconciler.reconcile.apply import Applier, ApplyOptions
from reconciler.reconcile.plan import ActionKind
from reconciler.reconcile.snapshot import snapshot
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import Fleet, Host
from tests.reconcile.conftest import GitRepo
from tests.reconcile.memory_driver import QuietVerbs, launched


class ToyDriver(QuietVerbs):
    """A kind of fleet held in memory: what is launched is recorded, and observed as alive."""

    launched: list[tuple[str, str]] = []  # (host, unit id), across drivers made in a test

    def __init__(
        self, fleet: Fleet, warn: Callable[[str], None], env: Mapping[str, str] | None
    ) -> None:
        self.fleet = fleet
        self.running: dict[str, dict[str, UnitRecord]] = {h.name: {} for h in fleet.hosts}

    python = "/toy/bin/python"

    def address(self, host: Host) -> str:
        return "127.0.0.77"  # not the local kind's 127.0.0.1: nothing listens here

    def default_home(self) -> str:
        return "/toy/home"

    def observe(self, hardware: Hardware | None) -> FleetObservation:
        found = FleetObservation(self.fleet.name)
        for host in self.fleet.hosts:
            found.hosts[host.name] = HostObservation(
                host=host.name,
                source="simulated",
                gpus=tuple(Gpu(index=i) for i in range(host.gpus)),
                units=tuple(self.running[host.name].values()),
            )
        return found

    def prepare(self, host: str, payload: Mapping[str, Any], wait: float) -> Any:
        return {"id": payload["id"], "state": "done", "step": "done"}

    def launch(self, host: str, unit: Mapping[str, Any]) -> UnitRecord:
        record = launched(unit)
        self.running[host][record.id] = record
        ToyDriver.launched.append((host, record.id))
        return record

    def stop(self, host: str, unit_id: str, grace: float = 10.0) -> dict[str, Any]:
        self.running[host].pop(unit_id, None)
        return {"stopped": unit_id}

    def units(self, host: str) -> list[UnitRecord]:
        return list(self.running[host].values())


def test_a_third_kind_of_fleet_plugs_in_through_the_drivers_dict(git_repo: GitRepo) -> None:
    ToyDriver.launched = []
    kinds: dict[str, DriverKind] = {**DRIVERS, "local": ToyDriver}  # the local fleet, by the toy
    drivers = Drivers(kinds=kinds)
    first = snapshot(git_repo.source(), drivers)
    starts = [a for a in first.plan.actions if a.kind == ActionKind.START]
    assert starts, "the release's units are planned on the toy fleet"
    units = [u.unit for d in first.desired.deployments for u in d.units]
    assert {u.address for u in units} == {"127.0.0.77"}  # the toy's address rule
    assert {u.argv[0] for u in units if u.role != "router"} == {"/toy/bin/python"}

    applier = Applier(first.repo, drivers, ApplyOptions(ready_timeout=0, drain_grace=0))
    applier.apply(first.plan, first.desired.deployments)
    assert sorted(ToyDriver.launched) == sorted((a.host, a.unit) for a in starts)

    again = snapshot(git_repo.source(), drivers)  # observed through the toy: all there
    assert {a.kind for a in again.plan.actions} <= {ActionKind.KEEP}
    seen = again.observations["local"].hosts["localhost"].units
    assert sorted(r.id for r in seen) == sorted(a.unit for a in starts)
