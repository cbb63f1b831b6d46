"""Pure logic: deployments placed one after another on one fleet — GPUs by the fleet's
placement (units that run keep theirs; trial GPUs stay free), then a block of ports no other
unit on those hosts uses, then the engine's units — each deployment seeing what the ones
before it took. What is used (GPUs, ports) and the fleet's domains are built once per pass
and kept up to date, so placing N deployments costs about N times one, not N².

Held while placing: GPUs and ports of every unit the agents report, except units of
deployments nothing wants any more (the plan stops those first), and GPUs busy with
processes denv did not start. Hosts that did not answer get nothing new; a cordoned host
(a drained Slurm node) neither, and the replicas on it are placed elsewhere. A deployment's
router stays where it runs (placement/routers.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reconciler.catalog.deployments import Deployment
from reconciler.engines.launch import launch_units
from reconciler.engines.placement import Placement
from reconciler.engines.units import EngineContext, Unit
from reconciler.fleet.kinds.cards import card_of
from reconciler.fleet.launching import one_unit_per_replica
from reconciler.fleet.model.labels import DeploymentKey, fleet_key, unit_id
from reconciler.fleet.model.observed import FleetObservation
from reconciler.fleet.model.rules import FleetRules
from reconciler.fleet.placement.gpus import (
    Demand,
    GpuBook,
    HostState,
    declared_states,
    replica_demands,
)
from reconciler.fleet.placement.ports import PortBook, address_of
from reconciler.fleet.placement.routers import RunningRouters
from reconciler.fleet.placement.slots import Nodes, with_ports
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import Role

Keeps = Callable[[DeploymentKey], bool]  # whether units of a deployment stay (are held)


def host_states(
    fleet: Fleet, observation: FleetObservation | None, keeps: Keeps
) -> dict[str, HostState]:
    """What placement may use on each observed host; every host as declared when the fleet
    was not observed."""
    if observation is None:
        return declared_states(fleet)
    states = {}
    spans: dict[str, dict[str, tuple[int, ...]]] = {}  # node -> unit -> GPUs, of jobs over nodes
    for head in observation.hosts.values():
        for record in head.units if not head.cordoned else ():
            key = fleet_key(record, fleet.name)
            if record.alive and record.nodes[1:] and (key is None or keeps(key)):
                for node in record.nodes[1:]:
                    spans.setdefault(node, {})[record.id] = record.gpus
    for host in fleet.hosts:
        seen = observation.hosts.get(host.name)
        if seen is None:
            continue
        if seen.cordoned:  # nothing is placed there, and its replicas are placed anew
            states[host.name] = HostState(gpus=())
            continue
        held: dict[str, tuple[int, ...]] = {}
        for record in seen.units:
            key = fleet_key(record, fleet.name)
            if key is not None and not keeps(key):
                continue  # the plan stops it first: its GPUs are free
            if key is None and not record.alive:
                continue
            held[record.id] = record.gpus  # a wanted unit that exited restarts in place
        busy = {i for record in seen.units if record.alive for i in record.gpus}
        busy |= {i for gpus in spans.get(host.name, {}).values() for i in gpus}
        foreign = frozenset(g.index for g in seen.gpus if g.processes and g.index not in busy)
        states[host.name] = HostState(
            gpus=tuple(g.index for g in seen.gpus),
            foreign=foreign,
            units=held,
            spans=spans.get(host.name, {}),
        )
    return states


class FleetPlacer:
    def __init__(
        self,
        fleet: Fleet,
        domain_size: int,
        observation: FleetObservation | None,
        keeps: Keeps,
        base_port: int,
        rules: FleetRules,
    ) -> None:
        self.fleet = fleet
        self.rules = rules
        self.domain_size = domain_size
        self.base_port = base_port
        self.states = host_states(fleet, observation, keeps)
        self.book = GpuBook(fleet, self.states, domain_size)
        # Units that run, by id: the fleet's placement keeps each on its GPUs.
        self.running = self.book.running
        self.ports = PortBook()
        self.routers = RunningRouters.of(fleet.name, observation)
        answering = observation.answering if observation else {}
        observed = observation.hosts if observation else {}
        for host, records in [*answering.items(), *((h, o.units) for h, o in observed.items())]:
            for record in records:
                key = fleet_key(record, fleet.name)
                if record.port is not None and (key is None or keeps(key)):
                    self.ports.hold(host, record.port, key)
        for host, seen in observed.items():
            self.ports.hold_listeners(host, seen, address_of(fleet, rules, host))

    def add(
        self,
        deployment: Deployment,
        context: EngineContext,
        known: Callable[[Placement], list[Unit] | None] = lambda _placement: None,
        grow: int = 0,
    ) -> list[Unit]:
        """The deployment's units, placed; what they use is held for the next deployments.
        `known` may give the units of a placement it has seen with the same inputs (they are
        not built again); `grow` replicas more that it may scale to keep their ports free
        (an elastic deployment's max). PlacementError or EngineError when it cannot run;
        nothing is held then."""
        key = (deployment.release, deployment.stage, deployment.fleet)
        prefix = unit_id(*key, "")
        placement = self._as_running(deployment, prefix) or self.book.place_deployment(
            deployment, self.rules, self.base_port, prefix
        )
        spare = grow * len(placement.slots) // len({(s.role, s.replica) for s in placement.slots})
        placement = self.routers.kept(placement, key, self.book.known, self.rules)
        preferred = self.routers.port(key)
        placement = self.ports.choose(placement, key, preferred, self.base_port, spare)
        units = known(placement) or launch_units(deployment, self.fleet, placement, context)
        if card_of(self.fleet).ONE_JOB_PER_REPLICA:
            units = one_unit_per_replica(units)
        self.ports.take(placement, key, spare)
        # A running unit being replaced on other GPUs keeps its old ones held too, until the
        # roll stops it (the book holds every unit's GPUs as the agents report them).
        for unit in units:
            if unit.gpu_indices:
                self.book.take(unit.host, unit.gpu_indices)
            if unit.node_argv and unit.role != "router":  # one job over several nodes
                for slot in placement.replica(unit.role, unit.replica)[1:]:
                    self.book.take(slot.host, slot.gpu_indices)
        return units

    def _as_running(self, deployment: Deployment, prefix: str) -> Placement | None:
        """When every replica already runs with its GPU count, the placement that
        place_deployment would return (each keeps its GPUs) without searching the fleet:
        the steady state of every pass. None when anything has to be placed."""
        replicas: list[tuple[Role, int, Nodes]] = []
        for role, pool in deployment.recipe.topology.pools():
            for index in range(pool.replicas):
                found = self.running.get(f"{prefix}{role}-{index}")
                if found is None or sum(len(slot.gpus) for slot in found) != pool.gpus:
                    return None
                replicas.append((role, index, [(slot.host, list(slot.gpus)) for slot in found]))
        return with_ports(self.fleet, replicas, self.rules, self.base_port, self.book.known)

    def fits_beside(self, deployments: Sequence[Deployment]) -> bool:
        """Whether every replica of `deployments` fits beside everything placed (those that
        run keep their GPUs); nothing is held."""
        demands = [
            demand
            for d in deployments
            for demand in replica_demands(d, unit_id(d.release, d.stage, d.fleet, ""))
        ]
        return not self.book.place(demands).errors

    def room(self, sizes: set[int]) -> dict[int, bool]:
        """For each replica size, whether one more replica fits beside everything placed."""
        return {
            size: not self.book.place([Demand("#surge", size, "a surge replica")]).errors
            for size in sorted(sizes)
        }

    @property
    def gpus(self) -> int:
        return sum(len(state.gpus) for state in self.states.values())
