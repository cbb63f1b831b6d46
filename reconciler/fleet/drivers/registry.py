"""Adapter: the kinds of fleet by the fleet file's `transport`, and one driver per fleet for a
session (a pass, a command), kept so connections are reused across observations.

Adding a kind of fleet: a driver module (base.FleetDriver) and one entry in DRIVERS."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reconciler.fleet.drivers.agent import AgentDriver
from reconciler.fleet.drivers.base import DriverKind, FleetDriver
from reconciler.fleet.drivers.local import LocalDriver
from reconciler.fleet.drivers.slurm import SlurmDriver
from reconciler.fleet.drivers.ssh import SshDriver
from reconciler.fleet.model.rules import FleetRules
from reconciler.spec.fleet import Fleet

DRIVERS: dict[str, DriverKind] = {
    "local": LocalDriver,
    "ssh": SshDriver,
    "slurm": SlurmDriver,
}


def rules_of(fleet: Fleet) -> FleetRules:
    """The rules of the fleet's kind (address, home, python), for callers of pure code that
    hold no session: the driver is made, nothing is dialled."""
    return DRIVERS[fleet.transport](fleet, lambda _m: None, None)


class Drivers:
    """One driver per fleet, made on first use from `kinds` by the fleet's transport."""

    def __init__(
        self,
        warn: Callable[[str], None] = lambda _m: None,
        local_env: Mapping[str, str] | None = None,
        kinds: Mapping[str, DriverKind] = DRIVERS,
        one_shot: bool = False,
    ) -> None:
        self.warn = warn
        self.one_shot = one_shot  # the agent started per call, as a laptop's command wants
        self.local_env = local_env
        self.kinds = kinds
        self._open: dict[str, FleetDriver] = {}

    def get(self, fleet: Fleet) -> FleetDriver:
        driver = self._open.get(fleet.name)
        if driver is None:
            driver = self.kinds[fleet.transport](fleet, self.warn, self.local_env)
            if self.one_shot and isinstance(driver, AgentDriver):
                driver.resident = False
            self._open[fleet.name] = driver
        driver.fleet = fleet  # the fleet file as read now; open connections are kept
        return driver

    def close(self) -> None:
        for driver in self._open.values():
            driver.close()
        self._open.clear()
