"""The fleet's placement as it was before placement kept its structures across a pass
(commit 49e6575): rebuilt from the host states for every deployment, every host tried for
every replica. Kept verbatim as the reference test_placer_reference.py compares the placer
with (but for the ports and the routers' hosts, which both take from the placer's own
PortBook and RunningRouters); not used by denv."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.catalog.deployments import Deployment
from reconciler.engines.launch import launch_units
from reconciler.engines.placement import PORT_BLOCK, RouterSlot
from reconciler.engines.placement import Placement as EnginePlacement
from reconciler.engines.placement import Slot as EngineSlot
from reconciler.engines.units import EngineContext, Unit
from reconciler.errors import PlacementError
from reconciler.fleet.model.labels import DeploymentKey, fleet_key, unit_id
from reconciler.fleet.model.observed import FleetObservation
from reconciler.fleet.model.rules import FleetRules
from reconciler.fleet.placement.ports import PortBook, address_of
from reconciler.fleet.placement.routers import RunningRouters
from reconciler.fleet.placement.slots import FleetHosts
from reconciler.spec.fit import domains
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import Role

Keeps = Callable[[DeploymentKey], bool]
Nodes = list[tuple[str, list[int]]]


@dataclass(frozen=True)
class Demand:
    key: str  # the unit id the replica runs as
    gpus: int
    label: str  # for messages, e.g. "chat-8b/canary replica 1" or "the decode pool"


@dataclass(frozen=True)
class HostState:
    """What placement needs to know of one host (from the agent's probe)."""

    gpus: tuple[int, ...]  # indices present
    foreign: frozenset[int] = frozenset()  # GPUs used by processes denv did not start
    units: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # running unit -> GPUs


@dataclass(frozen=True)
class Slot:
    host: str
    gpus: tuple[int, ...]


@dataclass
class Placement:
    slots: dict[str, tuple[Slot, ...]] = field(default_factory=dict)  # demand key -> nodes
    errors: list[str] = field(default_factory=list)


def declared_states(fleet: Fleet) -> dict[str, HostState]:
    """Every host as its file declares it, nothing running: for plans made before a probe."""
    return {host.name: HostState(gpus=tuple(range(host.gpus))) for host in fleet.hosts}


def host_states(
    fleet: Fleet, observation: FleetObservation | None, keeps: Keeps
) -> dict[str, HostState]:
    """What placement may use on each observed host; every host as declared when the fleet
    was not observed."""
    if observation is None:
        return declared_states(fleet)
    states = {}
    for host in fleet.hosts:
        seen = observation.hosts.get(host.name)
        if seen is None:
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
        foreign = frozenset(g.index for g in seen.gpus if g.processes and g.index not in busy)
        states[host.name] = HostState(
            gpus=tuple(g.index for g in seen.gpus), foreign=foreign, units=held
        )
    return states


def with_ports(
    fleet: Fleet,
    replicas: list[tuple[Role, int, Nodes]],
    rules: FleetRules,
    base_port: int = 8000,
) -> EnginePlacement:
    """Slots with addresses and port blocks for replicas already given hosts and GPUs (by
    the fleet's placement): block 0 is the router's, then one block per slot in order."""
    hosts = {host.name: host for host in fleet.hosts}
    slots: list[EngineSlot] = []
    for role, index, nodes in replicas:
        for node, (host, ids) in enumerate(nodes):
            slots.append(
                EngineSlot(
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
    gateway = next((h for h in fleet.hosts if h.gpus == 0), None)
    router_host = gateway or hosts[slots[0].host]
    router = RouterSlot(host=router_host.name, address=rules.address(router_host), port=base_port)
    return EnginePlacement(fleet=fleet.name, slots=slots, router=router)


def trial_gpus(fleet: Fleet, hosts: Mapping[str, HostState]) -> dict[str, set[int]]:
    """The GPUs kept for trials: the fleet's last `trial_gpus` GPUs."""
    kept: dict[str, set[int]] = {}
    left = fleet.trial_gpus
    for host in reversed(fleet.hosts):
        state = hosts.get(host.name)
        if state is None or left <= 0:
            continue
        chosen = sorted(state.gpus, reverse=True)[:left]
        kept[host.name] = set(chosen)
        left -= len(chosen)
    return kept


def _domains(
    fleet: Fleet, hosts: Mapping[str, HostState], domain_size: int
) -> list[list[tuple[str, tuple[int, ...]]]]:
    """The fleet's domains, holding only hosts and GPUs that were observed."""
    observed = []
    for domain in domains(fleet, domain_size):
        members = [
            (host, tuple(g for g in gpus if g in hosts[host].gpus))
            for host, gpus in domain
            if host in hosts
        ]
        if members:
            observed.append(members)
    return observed


def place_deployment(
    deployment: Deployment,
    fleet: Fleet,
    hosts: Mapping[str, HostState],
    domain_size: int,
    rules: FleetRules,
    base_port: int = 8000,
    unit_prefix: str = "",
) -> EnginePlacement:
    """Hosts, GPUs and ports for every replica of a deployment; PlacementError naming what
    is missing when one does not fit. Demand keys are `unit_prefix + role-replica`, so units
    that already run under those names keep their GPUs."""
    replicas = [
        (role, index, pool.gpus)
        for role, pool in deployment.recipe.topology.pools()
        for index in range(pool.replicas)
    ]
    demands = [
        Demand(
            f"{unit_prefix}{role}-{index}",
            gpus,
            f"replica {index}" if role == "aggregated" else f"{role} replica {index}",
        )
        for role, index, gpus in replicas
    ]
    placed = place(demands, fleet, hosts, domain_size)
    if placed.errors:
        more = len(placed.errors) - 1
        raise PlacementError(
            placed.errors[0] + (f" (and {more} more replica(s) do not fit)" if more else "")
        )
    return with_ports(
        fleet,
        [
            (role, index, [(slot.host, list(slot.gpus)) for slot in placed.slots[demand.key]])
            for (role, index, _), demand in zip(replicas, demands, strict=True)
        ],
        rules,
        base_port,
    )


def place(
    demands: Sequence[Demand], fleet: Fleet, hosts: Mapping[str, HostState], domain_size: int
) -> Placement:
    """Slots for every demand that fits; an error naming what is missing for each that not."""
    result = Placement()
    used: dict[str, set[int]] = {name: set(state.foreign) for name, state in hosts.items()}
    for name, kept in trial_gpus(fleet, hosts).items():
        used[name] |= kept
    running = {
        unit: (name, gpus) for name, state in hosts.items() for unit, gpus in state.units.items()
    }
    for name, state in hosts.items():
        for gpus in state.units.values():
            used[name] |= set(gpus)
    pending = []
    for demand in demands:
        if demand.key in running and len(running[demand.key][1]) == demand.gpus:
            host, gpus = running[demand.key]
            result.slots[demand.key] = (Slot(host, tuple(gpus)),)
        else:
            pending.append(demand)
    domains = _domains(fleet, hosts, domain_size)
    for demand in sorted(pending, key=lambda d: -d.gpus):  # largest first: less fragmentation
        slots = _fit(demand, domains, used)
        if slots is None:
            result.errors.append(_why(demand, fleet, domains, used))
            continue
        for slot in slots:
            used[slot.host] |= set(slot.gpus)
        result.slots[demand.key] = slots
    return result


def _free(
    domain: list[tuple[str, tuple[int, ...]]], used: Mapping[str, set[int]]
) -> list[tuple[str, list[int]]]:
    return [(host, [g for g in gpus if g not in used[host]]) for host, gpus in domain]


def _fit(
    demand: Demand, domains: list[list[tuple[str, tuple[int, ...]]]], used: Mapping[str, set[int]]
) -> tuple[Slot, ...] | None:
    # One host: the tightest fit across all domains.
    single = [
        (len(free), order, host, free)
        for order, domain in enumerate(domains)
        for host, free in _free(domain, used)
        if len(free) >= demand.gpus
    ]
    if single:
        _, _, host, free = min(single, key=lambda c: (c[0], c[1]))
        return (Slot(host, tuple(free[: demand.gpus])),)
    # Several hosts of one domain, the same number of GPUs on each, as few hosts as possible.
    for per_node in sorted(
        (k for k in range(1, demand.gpus) if demand.gpus % k == 0), reverse=True
    ):
        nodes = demand.gpus // per_node
        for domain in domains:
            able = [(h, free) for h, free in _free(domain, used) if len(free) >= per_node]
            if len(able) >= nodes:
                return tuple(Slot(h, tuple(free[:per_node])) for h, free in able[:nodes])
    return None


def _why(
    demand: Demand,
    fleet: Fleet,
    domains: list[list[tuple[str, tuple[int, ...]]]],
    used: Mapping[str, set[int]],
) -> str:
    sizes = [sum(len(gpus) for _, gpus in domain) for domain in domains]
    largest = max(sizes, default=0)
    if demand.gpus > largest:
        return (
            f"{demand.label} needs {gpus(demand.gpus)} in one domain; the largest domain of "
            f"{fleet.name} has {largest}"
        )
    most_free = max((sum(len(free) for _, free in _free(d, used)) for d in domains), default=0)
    return (
        f"{demand.label} needs {gpus(demand.gpus)} in one domain; the most free in one "
        f"domain of {fleet.name} is {most_free} (others are in use, busy with foreign "
        f"processes, or kept as the fleet's {fleet.trial_gpus} trial GPUs)"
    )


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
        # Units that run, by id: the fleet's placement keeps each on its GPUs.
        self.running = {
            unit: (host, gpus)
            for host, state in self.states.items()
            for unit, gpus in state.units.items()
        }
        self.ports = PortBook()
        self.routers = RunningRouters.of(fleet.name, observation)
        for host, seen in (observation.hosts if observation else {}).items():
            for record in seen.units:
                key = fleet_key(record, fleet.name)
                if key is not None and not keeps(key):
                    continue
                if record.port is not None:
                    self.ports.hold(host, record.port, key)
            self.ports.hold_listeners(host, seen, address_of(fleet, rules, host))

    def add(self, deployment: Deployment, context: EngineContext) -> list[Unit]:
        """The deployment's units, placed; what they use is held for the next deployments.
        PlacementError or EngineError when it cannot run; nothing is held then."""
        key = (deployment.release, deployment.stage, deployment.fleet)
        placement = self._as_running(deployment, unit_id(*key, "")) or place_deployment(
            deployment,
            self.fleet,
            self.states,
            self.domain_size,
            self.rules,
            self.base_port,
            unit_prefix=unit_id(*key, ""),
        )
        placement = self.routers.kept(placement, key, FleetHosts.of(self.fleet), self.rules)
        placement = self.ports.choose(placement, key, self.routers.port(key), self.base_port)
        units = launch_units(deployment, self.fleet, placement, context)
        self.ports.take(placement, key)
        self._hold(units, unit_id(*key, ""))
        return units

    def _as_running(self, deployment: Deployment, prefix: str) -> EnginePlacement | None:
        """When every replica already runs with its GPU count, the placement that
        place_deployment would return (each keeps its GPUs) without searching the fleet:
        the steady state of every pass. None when anything has to be placed."""
        replicas: list[tuple[Role, int, Nodes]] = []
        for role, pool in deployment.recipe.topology.pools():
            for index in range(pool.replicas):
                found = self.running.get(f"{prefix}{role}-{index}")
                if found is None or len(found[1]) != pool.gpus:
                    return None
                replicas.append((role, index, [(found[0], list(found[1]))]))
        return with_ports(self.fleet, replicas, self.rules, self.base_port)

    def _hold(self, units: list[Unit], prefix: str) -> None:
        # Keyed apart from the records' ids: a running unit being replaced on other GPUs
        # keeps its old ones held too, until the roll stops it.
        by_host: dict[str, dict[str, tuple[int, ...]]] = {}
        for unit in units:
            if unit.gpu_indices and unit.host in self.states:
                taken = by_host.setdefault(unit.host, {})
                taken[f"{prefix}{unit.name}#desired"] = tuple(unit.gpu_indices)
        for host, taken in by_host.items():
            state = self.states[host]
            held = {**state.units, **taken}
            self.states[host] = HostState(gpus=state.gpus, foreign=state.foreign, units=held)

    def room(self, sizes: set[int]) -> dict[int, bool]:
        """For each replica size, whether one more replica fits beside everything placed."""
        return {
            size: not place(
                [Demand("#surge", size, "a surge replica")],
                self.fleet,
                self.states,
                self.domain_size,
            ).errors
            for size in sorted(sizes)
        }

    @property
    def gpus(self) -> int:
        return sum(len(state.gpus) for state in self.states.values())


def gpus(count: int) -> str:
    return f"{count} GPU{'' if count == 1 else 's'}"
