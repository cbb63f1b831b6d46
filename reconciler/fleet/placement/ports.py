"""Pure logic: port blocks on hosts, so that deployments sharing a host never share a port.

A deployment's placement lays its ports out from one base port (the router's block, then one
block per slot: reconciler.fleet.placement.slots). Here each deployment gets the base it already
runs at when that is still free, else the lowest base whose blocks are free on every host
they land on. Ports of processes the plan will stop first are free; every other unit's are not.
An elastic deployment is placed anew with the blocks of the replicas it may grow by kept free
after its last one, so that scaling up never moves it (its router is the endpoint clients use).
A deployment that runs and no longer fits at its base (more replicas than it had, a
neighbour's blocks after its last) keeps its router's port, its endpoint, and lays its slots
out from the lowest base where they fit; only when its router's block is taken does all of it
move.
"""

from __future__ import annotations

from collections.abc import Hashable

from reconciler.engines.placement import PORT_BLOCK, Placement
from reconciler.errors import PlacementError
from reconciler.fleet.model.observed import HostObservation
from reconciler.fleet.model.rules import FleetRules
from reconciler.spec.fleet import Fleet

LAST_PORT = 65535
OTHER_PROCESS = ("another process",)  # the owner of a port no unit of denv explains


class PortBook:
    """Which ports are taken on each host of one fleet, and by whom."""

    def __init__(self) -> None:
        self._taken: dict[str, dict[int, Hashable]] = {}

    def hold(self, host: str, port: int, owner: Hashable) -> None:
        """The block of PORT_BLOCK ports from `port` is `owner`'s."""
        ports = self._taken.setdefault(host, {})
        for number in range(port, port + PORT_BLOCK):
            ports.setdefault(number, owner)

    def hold_listeners(self, host: str, seen: HostObservation, address: str | None) -> None:
        """Ports something listens on outside every unit's block (another program, or units of
        another agent on the same machine) are nobody's to take — on `address`, the host's
        (a port held only on another loopback address is free there)."""
        listening = seen.taken_ports(address) if address is not None else seen.listening
        blocks = [range(r.port, r.port + PORT_BLOCK) for r in seen.units if r.port is not None]
        ports = self._taken.setdefault(host, {})
        for port in listening:
            if not any(port in block for block in blocks):
                ports.setdefault(port, OTHER_PROCESS)

    def _blocks(self, placement: Placement, delta: int, spare: int = 0) -> list[tuple[str, int]]:
        """The router's block, each slot's, and `spare` more after the last slot's on each
        host the slots are on (where more replicas of the deployment would go first)."""
        first = [(placement.router.host, placement.router.port + delta)]
        last = max(slot.port for slot in placement.slots) + delta
        hosts = sorted({slot.host for slot in placement.slots})
        grown = [(host, last + PORT_BLOCK * k) for k in range(1, spare + 1) for host in hosts]
        return first + [(slot.host, slot.port + delta) for slot in placement.slots] + grown

    def _free(self, blocks: list[tuple[str, int]], owner: Hashable) -> bool:
        for host, start in blocks:
            ports = self._taken.get(host)
            if ports is None:
                continue
            for number in range(start, start + PORT_BLOCK):
                if ports.get(number, owner) != owner:
                    return False
        return True

    def choose(
        self,
        placement: Placement,
        owner: Hashable,
        preferred: int | None,
        base: int,
        spare: int = 0,
    ) -> Placement:
        """`placement` moved to `preferred` (where the deployment runs now) when its blocks
        are free there, else to the lowest free base from `base`; `spare` blocks after its
        last slot's free too (where it runs, only if they are: a neighbour stays). Nothing
        is held yet."""
        span = max(slot.port for slot in placement.slots) + PORT_BLOCK - placement.router.port
        starts = range(base, LAST_PORT + 2 - span, PORT_BLOCK)
        tries: list[tuple[int, int, int]] = []  # (router's port, slots' base, spare blocks)
        if preferred is not None:
            tries += [(preferred, preferred, spare), (preferred, preferred, 0)]
            # the router where it listens (clients keep their endpoint), its slots moved
            tries += [(preferred, start, extra) for extra in (spare, 0) for start in starts]
        tries += [(start, start, spare) for start in starts]
        for router, start, extra in tries:
            moved = shifted(placement, start - placement.router.port, router)
            blocks = self._blocks(moved, 0, extra)
            if (
                start + span + extra * PORT_BLOCK <= LAST_PORT + 1
                and not _on_router(blocks)
                and self._free(blocks, owner)
            ):
                return moved
        raise PlacementError(f"no free block of {span} ports from port {base} on its hosts")

    def take(self, placement: Placement, owner: Hashable, spare: int = 0) -> None:
        """Hold the placement's blocks, and its `spare` ones where nobody holds them."""
        for host, port in self._blocks(placement, 0, spare):
            self.hold(host, port, owner)


def _on_router(blocks: list[tuple[str, int]]) -> bool:
    """Whether a slot's block overlaps its own router's (the first), which the owner check
    alone would allow."""
    (host, port), slots = blocks[0], blocks[1:]
    return any(h == host and abs(p - port) < PORT_BLOCK for h, p in slots)


def shifted(placement: Placement, delta: int, router_port: int | None = None) -> Placement:
    """The placement's ports moved by `delta`; its router's to `router_port` when given."""
    port = placement.router.port + delta if router_port is None else router_port
    if delta == 0 and port == placement.router.port:
        return placement
    slots = [slot.model_copy(update={"port": slot.port + delta}) for slot in placement.slots]
    router = placement.router.model_copy(update={"port": port})
    return placement.model_copy(update={"slots": slots, "router": router})


def address_of(fleet: Fleet, rules: FleetRules, host: str) -> str | None:
    """The address units on `host` bind to; None for a host the fleet does not declare."""
    found = next((h for h in fleet.hosts if h.name == host), None)
    return rules.address(found) if found is not None else None
