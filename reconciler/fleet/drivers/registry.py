"""Adapter: each fleet's driver, from its kind's card (reconciler.fleet.kinds: the card names
its driver class, imported here when a fleet of the kind is first driven), and one driver per
fleet for a session (a pass, a command), kept so connections are reused across observations."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping

from reconciler.fleet.drivers.agent import AgentDriver
from reconciler.fleet.drivers.base import DriverKind, FleetDriver
from reconciler.fleet.kinds.cards import card
from reconciler.fleet.model.rules import FleetRules
from reconciler.spec.fleet import Fleet


def driver_kind(transport: str) -> DriverKind:
    """The driver class the card of kind `transport` names (`module:Class`)."""
    module, _, name = card(transport).DRIVER.partition(":")
    found: DriverKind = getattr(importlib.import_module(module), name)
    return found


def rules_of(fleet: Fleet) -> FleetRules:
    """The rules of the fleet's kind (address, home, python), for callers of pure code that
    hold no session: the driver is made, nothing is dialled."""
    return driver_kind(fleet.transport)(fleet, lambda _m: None, None)


class Drivers:
    """One driver per fleet, made on first use by its kind's card (or by `kinds`, stand-ins
    by transport that tests give)."""

    def __init__(
        self,
        warn: Callable[[str], None] = lambda _m: None,
        local_env: Mapping[str, str] | None = None,
        kinds: Mapping[str, DriverKind] | None = None,
        one_shot: bool = False,
    ) -> None:
        self.warn = warn
        self.one_shot = one_shot  # the agent started per call, as a laptop's command wants
        self.local_env = local_env
        self.kinds = kinds if kinds is not None else {}  # tests' stand-ins, by transport
        self._open: dict[str, FleetDriver] = {}
        self._lock = threading.Lock()  # fleets are observed and acted on from threads
        # fleet -> "fleet:epoch" of the lease this process holds: its agents' every call
        # carries it, and an agent refuses it once a newer one was seen (fences.py)
        self.fences: dict[str, str] = {}

    def get(self, fleet: Fleet) -> FleetDriver:
        with self._lock:
            driver = self._open.get(fleet.name)
            if driver is None:
                kind = self.kinds.get(fleet.transport) or driver_kind(fleet.transport)
                driver = kind(fleet, self.warn, self.local_env)
                if self.one_shot and isinstance(driver, AgentDriver):
                    driver.resident = False
                self._open[fleet.name] = driver
            driver.fleet = fleet  # the fleet file as read now; open connections are kept
            if isinstance(driver, AgentDriver):
                driver.fence = self.fences.get(fleet.name)
            return driver

    def close(self) -> None:
        with self._lock:
            opened, self._open = list(self._open.values()), {}
        for driver in opened:
            driver.close()
