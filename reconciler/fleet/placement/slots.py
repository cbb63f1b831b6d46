"""Pure logic: the slots of replicas already given hosts and GPUs — each host's address by
the fleet's kind (FleetRules), and a block of ports per slot from a base port (block 0 is
the router's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.engines.placement import PORT_BLOCK, Placement, RouterSlot, Slot
from reconciler.errors import PlacementError
from reconciler.fleet.model.rules import FleetRules
from reconciler.spec.fleet import Fleet, Host
from reconciler.spec.recipe import Role

# One replica's nodes: (host name, GPU indices on it), node 0 first.
Nodes = list[tuple[str, list[int]]]


@dataclass(frozen=True)
class FleetHosts:
    """A fleet's hosts by name and its gateway (the first host without GPUs, where routers
    run): looked up once for every deployment placed on the fleet in a pass."""

    by_name: Mapping[str, Host]
    gateway: Host | None

    @classmethod
    def of(cls, fleet: Fleet) -> FleetHosts:
        return cls(
            by_name={host.name: host for host in fleet.hosts},
            gateway=next((h for h in fleet.hosts if h.gpus == 0), None),
        )


def with_ports(
    fleet: Fleet,
    replicas: list[tuple[Role, int, Nodes]],
    rules: FleetRules,
    base_port: int = 8000,
    known: FleetHosts | None = None,
) -> Placement:
    """Slots with addresses and port blocks for replicas already given hosts and GPUs (by
    the fleet's placement): block 0 is the router's, then one block per slot in order.
    `known` is FleetHosts.of(fleet) when the caller keeps it."""
    known = known or FleetHosts.of(fleet)
    hosts = known.by_name
    slots: list[Slot] = []
    for role, index, nodes in replicas:
        for node, (host, ids) in enumerate(nodes):
            slots.append(
                Slot(
                    role=role,
                    replica=index,
                    node=node,
                    nodes=len(nodes),
                    host=host,
                    address=rules.address(hosts[host]),
                    gpu_indices=ids,
                    port=base_port + PORT_BLOCK * (len(slots) + 1),
                )
            )
    if not slots:
        raise PlacementError(f"nothing to place on {fleet.name}")
    if slots[-1].port + PORT_BLOCK > 65536:
        raise PlacementError(f"base port {base_port} leaves too few ports for {len(slots)} slots")
    router_host = known.gateway or hosts[slots[0].host]
    router = RouterSlot(host=router_host.name, address=rules.address(router_host), port=base_port)
    return Placement(fleet=fleet.name, slots=slots, router=router)
