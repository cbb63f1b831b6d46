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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.catalog.deployments import Deployment
from reconciler.engines.placement import Placement as EnginePlacement
from reconciler.errors import PlacementError
from reconciler.fleet.model.rules import FleetRules
from reconciler.fleet.placement.slots import with_ports
from reconciler.spec.fit import domains
from reconciler.spec.fleet import Fleet


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
            f"{deployment.recipe.id} needs {deployment.gpus} GPUs; {free} of the "
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
            f"{demand.label} needs {demand.gpus} GPUs in one domain; the largest domain "
            f"of {fleet.name} has {largest}"
        )
    most_free = max((sum(len(free) for _, free in _free(d, used)) for d in domains), default=0)
    return (
        f"{demand.label} needs {demand.gpus} GPUs in one domain; the most free in one "
        f"domain of {fleet.name} is {most_free} (others are in use, busy with foreign "
        f"processes, or kept as the fleet's {fleet.trial_gpus} trial GPUs)"
    )
