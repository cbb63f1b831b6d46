"""Models: what pure code needs to know of a kind of fleet — the address of a host, the
agent's default home, the interpreter units run with. Each driver answers for its own kind
(reconciler.fleet.drivers); pure code is handed the answer, never the driver's module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from reconciler.spec.fleet import Fleet, Host


class FleetRules(Protocol):
    @property
    def python(self) -> str:
        """The interpreter on the fleet's hosts."""
        ...

    def address(self, host: Host) -> str:
        """Where other hosts and the bot reach `host`'s units."""
        ...

    def default_home(self) -> str:
        """The agent's home on a host that did not report its own (not observed). A host's
        own paths come from its own observation only (reconciler.fleet.kinds.agenthosts),
        never another's."""
        ...


RulesOf = Callable[[Fleet], FleetRules]  # the rules of each fleet, by its kind
