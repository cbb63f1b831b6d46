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
from reconciler.fleet.model.labels import DeploymentKey, router_key
from reconciler.fleet.model.observed import FleetObservation
from reconciler.fleet.model.rules import FleetRules
from reconciler.fleet.placement.slots import FleetHosts


@dataclass(frozen=True)
class RunningRouters:
    where: dict[DeploymentKey, tuple[str, int]]  # (host, port)
    hosts: frozenset[str]  # the hosts a router may stay on

    @classmethod
    def of(cls, fleet: str, observation: FleetObservation | None) -> RunningRouters:
        """Where each router runs; of two for one deployment (one started elsewhere while
        the other's host was not reached), the one a host that answered reports, then a
        live one, then the newest (the endpoint `denv status` showed last)."""
        if observation is None:
            return cls({}, frozenset())
        found = [(h, r, False) for h, records in observation.answering.items() for r in records]
        found += [(h, r, True) for h, seen in observation.hosts.items() for r in seen.units]
        best: dict[DeploymentKey, tuple[tuple[bool, bool, float], str, int]] = {}
        for host, record, answered in found:
            key = router_key(record, fleet)
            if key is None or record.port is None:
                continue
            rank = (answered, record.alive, record.started_at or 0.0)
            if key not in best or rank > best[key][0]:
                best[key] = (rank, host, record.port)
        hosts = set(observation.answering)
        hosts |= {h for h, seen in observation.hosts.items() if not seen.cordoned}
        where = {key: (host, port) for key, (_, host, port) in best.items()}
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
