"""Pure logic: where each deployment's router runs, and whether it stays there.

A router is its deployment's endpoint: clients know it by address and port. It stays on the
host where it runs — on a host that answered and is not cordoned, or on one whose agent did
not answer where the router itself still answers (FleetObservation.answering) — whatever
host the deployment's first replica is placed on now. A fleet with a gateway keeps its
routers there; a router whose host may not keep it goes where the placement puts it (the
first replica's host).
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.engines.placement import Placement
from reconciler.fleet.model.labels import DeploymentKey, fleet_key
from reconciler.fleet.model.observed import FleetObservation
from reconciler.fleet.model.rules import FleetRules
from reconciler.fleet.placement.slots import FleetHosts


@dataclass(frozen=True)
class RunningRouters:
    where: dict[DeploymentKey, tuple[str, int]]  # (host, port), a host that answered first
    hosts: frozenset[str]  # the hosts a router may stay on

    @classmethod
    def of(cls, fleet: str, observation: FleetObservation | None) -> RunningRouters:
        if observation is None:
            return cls({}, frozenset())
        where: dict[DeploymentKey, tuple[str, int]] = {}
        found = [(h, r) for h, records in observation.answering.items() for r in records]
        found += [(h, r) for h, seen in observation.hosts.items() for r in seen.units]
        for host, record in found:  # the answering first: what a host that answered says wins
            key = fleet_key(record, fleet)
            router = record.labels.get("role") == "router"
            if key is not None and router and record.port is not None:
                where[key] = (host, record.port)
        hosts = set(observation.answering)
        hosts |= {h for h, seen in observation.hosts.items() if not seen.cordoned}
        return cls(where, frozenset(hosts))

    def port(self, key: DeploymentKey) -> int | None:
        """The port the deployment's router listens on now."""
        running = self.where.get(key)
        return running[1] if running is not None else None

    def kept(
        self, placement: Placement, key: DeploymentKey, known: FleetHosts, rules: FleetRules
    ) -> Placement:
        """`placement` with its router on the host where it runs, where that host may keep
        it and the fleet has no gateway; else as placed."""
        running = self.where.get(key)
        if running is None or known.gateway is not None or running[0] not in self.hosts:
            return placement
        declared = known.by_name.get(running[0])
        if declared is None or declared.name == placement.router.host:
            return placement  # no longer the fleet's, or already there
        router = placement.router.model_copy(
            update={"host": declared.name, "address": rules.address(declared)}
        )
        return placement.model_copy(update={"router": router})
