"""Pure logic: port blocks on hosts, so that deployments sharing a host never share a port.

A deployment's placement lays its ports out from one base port (the router's block, then one
block per slot: reconciler.fleet.placement.slots). Here each deployment gets the base it already
runs at when that is still free, else the lowest base whose blocks are free on every host
they land on. Ports of processes the plan will stop first are free; every other unit's are not.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

from reconciler.engines.placement import PORT_BLOCK, Placement
from reconciler.errors import PlacementError

LAST_PORT = 65535
OTHER_PROCESS = ("another process",)  # the owner of a port no unit of denv explains
SlotKey = tuple[str, str, int, int]  # host, role, replica, node: where an engine slot runs


class PortBook:
    """Which ports are taken on each host of one fleet, and by whom."""

    def __init__(self) -> None:
        self._taken: dict[str, dict[int, Hashable]] = {}

    def hold(self, host: str, port: int, owner: Hashable) -> None:
        """The block of PORT_BLOCK ports from `port` is `owner`'s."""
        ports = self._taken.setdefault(host, {})
        for number in range(port, port + PORT_BLOCK):
            ports.setdefault(number, owner)

    def hold_listeners(
        self, host: str, listening: Iterable[int], unit_ports: Iterable[int]
    ) -> None:
        """Ports something listens on outside every unit's block (another program, or units of
        another agent on the same machine) are nobody's to take."""
        blocks = [range(port, port + PORT_BLOCK) for port in unit_ports]
        ports = self._taken.setdefault(host, {})
        for port in listening:
            if not any(port in block for block in blocks):
                ports.setdefault(port, OTHER_PROCESS)

    def _blocks(self, placement: Placement, delta: int) -> list[tuple[str, int]]:
        first = [(placement.router.host, placement.router.port + delta)]
        return first + [(slot.host, slot.port + delta) for slot in placement.slots]

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
        running: Mapping[SlotKey, int] | None = None,
    ) -> Placement:
        """`placement` at `preferred` (where the deployment's router runs now) when its block
        is free there: every slot that runs keeps its block (`running`: where each listens
        now), each new one takes its place in the layout, or a free block elsewhere when a
        neighbour holds that (a deployment that grows restarts none of its units); else the
        lowest base from `base` where every block is free. Nothing is held yet."""
        span = max(slot.port for slot in placement.slots) + PORT_BLOCK - placement.router.port
        if preferred is not None:
            moved = shifted(placement, preferred - placement.router.port)
            kept = self._kept(moved, owner, base, running or {})
            if kept is not None:
                return kept
        for start in range(base, LAST_PORT + 2 - span, PORT_BLOCK):
            delta = start - placement.router.port
            if self._free(self._blocks(placement, delta), owner):
                return shifted(placement, delta)
        raise PlacementError(f"no free block of {span} ports from port {base} on its hosts")

    def _kept(
        self, placement: Placement, owner: Hashable, base: int, running: Mapping[SlotKey, int]
    ) -> Placement | None:
        """The router where it is; each slot at the block it runs on, else at its own place
        in the layout, when free; the others at the lowest blocks nobody holds. None when
        the router's block is not free or no block is left."""
        router = placement.router
        if not self._free([(router.host, router.port)], owner):
            return None
        used = {(router.host, router.port)}
        ports: dict[int, int] = {}
        wanted: list[list[int | None]] = [
            [running.get((s.host, s.role, s.replica, s.node)) for s in placement.slots],
            [s.port for s in placement.slots],
        ]
        for choice in wanted:  # where the slots run first, then the layout's places
            for i, (slot, port) in enumerate(zip(placement.slots, choice, strict=True)):
                if i in ports or port is None or port + PORT_BLOCK > LAST_PORT + 1:
                    continue
                where = (slot.host, port)
                if where not in used and self._free([(slot.host, port)], owner):
                    ports[i] = port
                    used.add(where)
        for i, slot in enumerate(placement.slots):
            if i in ports:
                continue
            held = self._taken.get(slot.host, {})
            free = (
                port
                for port in range(base, LAST_PORT + 2 - PORT_BLOCK, PORT_BLOCK)
                if (slot.host, port) not in used
                and not any(n in held for n in range(port, port + PORT_BLOCK))
            )
            found = next(free, None)
            if found is None:
                return None
            ports[i] = found
            used.add((slot.host, found))
        slots = [
            s.model_copy(update={"port": ports[i]}) if ports[i] != s.port else s
            for i, s in enumerate(placement.slots)
        ]
        return placement.model_copy(update={"slots": slots})

    def take(self, placement: Placement, owner: Hashable) -> None:
        for host, port in self._blocks(placement, 0):
            self.hold(host, port, owner)


def shifted(placement: Placement, delta: int) -> Placement:
    if delta == 0:
        return placement
    slots = [slot.model_copy(update={"port": slot.port + delta}) for slot in placement.slots]
    router = placement.router.model_copy(update={"port": placement.router.port + delta})
    return placement.model_copy(update={"slots": slots, "router": router})
