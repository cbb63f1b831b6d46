"""Models: the fleet driver protocol — what the reconciler, bench and the CLI ask of a kind
of fleet (SSH hosts with denv's agent, this machine, a scheduler). A driver is made for one
fleet; connections it opens are kept until `close`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from reconciler.fleet.model.answers import LeaseAnswer
from reconciler.fleet.model.observed import FleetObservation, UnitRecord
from reconciler.fleet.model.rules import FleetRules
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import Fleet


class FleetDriver(FleetRules, Protocol):
    fleet: Fleet

    def observe(self, hardware: Hardware | None) -> FleetObservation:
        """Every host's GPUs and units, in one pass; hosts that did not answer with their
        cause (FleetObservation.errors) while the others are reported."""
        ...

    def prepare(self, host: str, payload: Mapping[str, Any], wait: float) -> Any:
        """Start or follow `host`'s prepare job (runtimes, weights); its state, after waiting
        up to `wait` seconds for it to change. Idempotent: the payload's id names the job."""
        ...

    def launch(self, host: str, unit: Mapping[str, Any]) -> UnitRecord:
        """Start the unit on `host` (idempotent: a unit already running as specified stays)."""
        ...

    def stop(self, host: str, unit_id: str, grace: float = 10.0) -> dict[str, Any]: ...

    def units(self, host: str) -> list[UnitRecord]: ...

    def logs(self, host: str, unit_id: str, tail: int = 100) -> dict[str, Any]: ...

    def runtimes(self, host: str) -> dict[str, Any]: ...

    def lease(
        self,
        name: str,
        holder: str,
        ttl: float,
        release: bool = False,
        note: Any = None,
        peek: bool = False,
    ) -> LeaseAnswer:
        """Take, renew or release the fleet's lease `name` (kept where the kind keeps it);
        `peek` only reads it, with its note."""
        ...

    def close(self) -> None: ...


# How a registry makes a driver: the fleet, a callback for warnings, the environment for
# processes the bot starts on its own machine (None: its own).
DriverKind = Callable[[Fleet, Callable[[str], None], Mapping[str, str] | None], FleetDriver]
