"""Pure logic: placing replicas on GPUs.

Each demand (one replica, or one pool replica) gets a host and GPU indices — or, when it
needs more GPUs than one host has, several hosts of one NVLink domain with the same number
of GPUs on each (a multi-node replica). Rules, in order:

- a unit that already runs keeps its GPUs (placement never moves a running replica);
- never two units on one GPU, and GPUs that foreign processes use are not free;
- the fleet's trial GPUs (the last `trial_gpus` GPUs, taking hosts from the end of the file
  and each host's highest indices first) are kept for bench runs and optimizer trials;
- a replica stays inside one NVLink domain; on one host, the host whose free GPUs fit it most
  tightly is chosen (less fragmentation); ties go by the order of hosts in the fleet file.

When something cannot fit, the error names what is missing.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.catalog.deployments import Deployment
from reconciler.engines.placement import Placement as EnginePlacement
from reconciler.errors import PlacementError
from reconciler.fleet.model.rules import FleetRules
from reconciler.fleet.placement.slots import FleetHosts, with_ports
from reconciler.spec.fit import domains
from reconciler.spec.fleet import Fleet
from reconciler.spec.words import counted


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
    # unit -> GPUs here of a job over several nodes whose first node is another host
    spans: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Slot:
    host: str
    gpus: tuple[int, ...]


@dataclass
class Placement:
    slots: dict[str, tuple[Slot, ...]] = field(default_factory=dict)  # demand key -> nodes
    errors: list[str] = field(default_factory=list)


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


def declared_states(fleet: Fleet) -> dict[str, HostState]:
    """Every host as its file declares it, nothing running: for plans made before a probe."""
    return {host.name: HostState(gpus=tuple(range(host.gpus))) for host in fleet.hosts}


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
    book = GpuBook(fleet, hosts, domain_size)
    return book.place_deployment(deployment, rules, base_port, unit_prefix)


def replica_demands(deployment: Deployment, unit_prefix: str) -> list[Demand]:
    """A Demand per replica of the deployment, keyed as its units run (`unit_prefix +
    role-replica`): those that run already keep their GPUs."""
    return [
        Demand(
            f"{unit_prefix}{role}-{index}",
            pool.gpus,
            f"replica {index}" if role == "aggregated" else f"{role} replica {index}",
        )
        for role, pool in deployment.recipe.topology.pools()
        for index in range(pool.replicas)
    ]


def place_on_trial_gpus(
    deployment: Deployment,
    fleet: Fleet,
    hosts: Mapping[str, HostState],
    domain_size: int,
    rules: FleetRules,
    base_port: int,
    unit_prefix: str,
) -> EnginePlacement:
    """place_deployment on the fleet's trial GPUs only, for a bench run or an optimizer trial:
    GPUs that any unit holds (a release's, another trial's) or a foreign process uses are not
    free. The trial GPUs are those of both the hosts as observed and the fleet file, so a host
    that did not answer never shifts them onto GPUs the reconciler places releases on."""
    if fleet.trial_gpus == 0:
        raise PlacementError(
            f"fleet {fleet.name} has no trial GPUs (set trial_gpus in fleets/{fleet.name}.yaml)"
        )
    declared = trial_gpus(fleet, declared_states(fleet))
    kept = {
        name: tuple(sorted(gpus & declared.get(name, set())))
        for name, gpus in trial_gpus(fleet, hosts).items()
    }
    only = {
        name: HostState(gpus=gpus, foreign=hosts[name].foreign, units=hosts[name].units)
        for name, gpus in kept.items()
        if gpus
    }
    free = sum(
        1
        for state in only.values()
        for g in state.gpus
        if g not in state.foreign and not any(g in used for used in state.units.values())
    )
    if deployment.gpus > free:
        raise PlacementError(
            f"{deployment.recipe.id} needs {counted(deployment.gpus, 'GPU')}; {free} of the "
            f"{fleet.trial_gpus} trial GPUs of {fleet.name} are free"
        )
    try:  # nothing is kept back among the trial GPUs themselves
        return place_deployment(
            deployment,
            fleet.model_copy(update={"trial_gpus": 0}),
            only,
            domain_size,
            rules,
            base_port,
            unit_prefix,
        )
    except PlacementError:
        raise PlacementError(
            f"{deployment.recipe.id} does not fit on the trial GPUs of {fleet.name}: {free} "
            f"are free, but each replica's GPUs must sit in one NVLink domain of {domain_size}"
        ) from None


def place(
    demands: Sequence[Demand], fleet: Fleet, hosts: Mapping[str, HostState], domain_size: int
) -> Placement:
    """Slots for every demand that fits; an error naming what is missing for each that not."""
    return GpuBook(fleet, hosts, domain_size).place(demands)


class GpuBook:
    """Which GPUs of one fleet's hosts are used, kept across the deployments placed in one
    pass (GpuBook.take holds what a placed deployment uses), with every domain member (one
    host's GPUs in one domain) indexed by how many GPUs it has free: a replica on one host
    costs a look-up, not a walk over the fleet."""

    def __init__(self, fleet: Fleet, hosts: Mapping[str, HostState], domain_size: int) -> None:
        self.fleet = fleet
        self.known = FleetHosts.of(fleet)
        self.used: dict[str, set[int]] = {name: set(s.foreign) for name, s in hosts.items()}
        for name, kept in trial_gpus(fleet, hosts).items():
            self.used[name] |= kept
        for name, state in hosts.items():
            for gpus in state.units.values():
                self.used[name] |= set(gpus)
        # running unit -> its slots: node 0's, then those of a job over several nodes
        self.running: dict[str, list[Slot]] = {
            unit: [Slot(name, tuple(gpus))]
            for name, state in hosts.items()
            for unit, gpus in state.units.items()
        }
        for name, state in hosts.items():
            for unit, gpus in state.spans.items():
                self.used[name] |= set(gpus)
                if unit in self.running:
                    self.running[unit].append(Slot(name, tuple(gpus)))
        self.domains = _domains(fleet, hosts, domain_size)
        self._largest = max((sum(len(g) for _, g in d) for d in self.domains), default=0)
        # Members in the order the search prefers them on a tie: domain, then host order.
        self._members = [member for domain in self.domains for member in domain]
        self._of_host: dict[str, list[int]] = {}
        self._domain_of: list[int] = []
        for number, domain in enumerate(self.domains):
            self._domain_of += [number] * len(domain)
        for index, (host, _) in enumerate(self._members):
            self._of_host.setdefault(host, []).append(index)
        self._free = [len(self._free_gpus(index)) for index in range(len(self._members))]
        self._domain_free = [0] * len(self.domains)
        for index, free in enumerate(self._free):
            self._domain_free[self._domain_of[index]] += free
        # free count -> heap of member indices (stale entries skipped when read)
        self._by_free: dict[int, list[int]] = {}
        for index, free in enumerate(self._free):
            self._by_free.setdefault(free, []).append(index)  # ascending: already a heap
        self._counts = sorted(self._by_free)
        # domains where a replica can span hosts (two members or more), in order
        self._shared = [(n, d) for n, d in enumerate(self.domains) if len(d) > 1]
        self._first = [0] * len(self.domains)  # the index of each domain's first member
        for index in range(len(self._members) - 1, -1, -1):
            self._first[self._domain_of[index]] = index

    def place_deployment(
        self, deployment: Deployment, rules: FleetRules, base_port: int, unit_prefix: str
    ) -> EnginePlacement:
        """place_deployment on this book; nothing is held (GpuBook.take does)."""
        replicas = [
            (role, index, pool.gpus)
            for role, pool in deployment.recipe.topology.pools()
            for index in range(pool.replicas)
        ]
        demands = replica_demands(deployment, unit_prefix)
        placed = self.place(demands)
        if placed.errors:
            more = len(placed.errors) - 1
            raise PlacementError(
                placed.errors[0] + (f" (and {more} more replica(s) do not fit)" if more else "")
            )
        return with_ports(
            self.fleet,
            [
                (role, index, [(slot.host, list(slot.gpus)) for slot in placed.slots[demand.key]])
                for (role, index, _), demand in zip(replicas, demands, strict=True)
            ],
            rules,
            base_port,
            self.known,
        )

    def place(self, demands: Sequence[Demand]) -> Placement:
        """Slots for every demand that fits, each seeing those placed before it; an error for
        each that does not. Nothing stays held."""
        result = Placement()
        pending = []
        for demand in demands:
            running = self.running.get(demand.key)
            if running is not None and sum(len(slot.gpus) for slot in running) == demand.gpus:
                result.slots[demand.key] = tuple(running)
            else:
                pending.append(demand)
        taken: list[Slot] = []
        for demand in sorted(pending, key=lambda d: -d.gpus):  # largest first: less fragmentation
            slots = self._fit(demand)
            if slots is None:
                result.errors.append(self._why(demand))
                continue
            for slot in slots:
                self.take(slot.host, slot.gpus)
            taken += slots
            result.slots[demand.key] = slots
        for slot in taken:
            self._release(slot.host, slot.gpus)
        return result

    def take(self, host: str, gpus: Sequence[int]) -> None:
        """The GPUs are used from now on (a unit placed there); hosts not observed are left."""
        used = self.used.get(host)
        if used is not None:
            used.update(gpus)
            self._recount(host)

    def _release(self, host: str, gpus: Sequence[int]) -> None:
        self.used[host].difference_update(gpus)
        self._recount(host)

    def _recount(self, host: str) -> None:
        for index in self._of_host.get(host, ()):
            free = len(self._free_gpus(index))
            if free != self._free[index]:
                self._domain_free[self._domain_of[index]] += free - self._free[index]
                self._free[index] = free
                if free not in self._by_free:
                    self._by_free[free] = []
                    self._counts = sorted(self._by_free)
                heapq.heappush(self._by_free[free], index)

    def _free_gpus(self, index: int) -> list[int]:
        host, gpus = self._members[index]
        used = self.used[host]
        return [g for g in gpus if g not in used]

    def _tightest(self, need: int) -> int | None:
        """The member with the fewest free GPUs that still fit `need`, first in order on a
        tie."""
        for count in self._counts:
            if count < need:
                continue
            heap = self._by_free[count]
            while heap and self._free[heap[0]] != count:
                heapq.heappop(heap)  # stale: its count changed since
            if heap:
                return heap[0]
        return None

    def _fit(self, demand: Demand) -> tuple[Slot, ...] | None:
        # One host: the tightest fit across all domains.
        single = self._tightest(demand.gpus)
        if single is not None:
            host = self._members[single][0]
            return (Slot(host, tuple(self._free_gpus(single)[: demand.gpus])),)
        # Several hosts of one domain, the same number of GPUs on each, as few hosts as possible.
        for per_node in sorted(
            (k for k in range(1, demand.gpus) if demand.gpus % k == 0), reverse=True
        ):
            nodes = demand.gpus // per_node
            for number, domain in self._shared:
                if self._domain_free[number] < demand.gpus:
                    continue  # cannot hold it, however it is split
                first = self._first[number]
                able = [
                    index
                    for index in range(first, first + len(domain))
                    if self._free[index] >= per_node
                ]
                if len(able) >= nodes:
                    return tuple(
                        Slot(self._members[i][0], tuple(self._free_gpus(i)[:per_node]))
                        for i in able[:nodes]
                    )
        return None

    def _why(self, demand: Demand) -> str:
        fleet = self.fleet
        if demand.gpus > self._largest:
            return (
                f"{demand.label} needs {counted(demand.gpus, 'GPU')} in one domain; the largest "
                f"domain of {fleet.name} has {self._largest}"
            )
        most_free = max(self._domain_free, default=0)
        return (
            f"{demand.label} needs {counted(demand.gpus, 'GPU')} in one domain; the most free in "
            f"one domain of {fleet.name} is {most_free} (others are in use, busy with foreign "
            f"processes, or kept as the fleet's {fleet.trial_gpus} trial GPUs)"
        )
