"""Pure logic: does a topology fit a fleet — one replica inside one NVLink domain, and all
replicas at once on the fleet's serving GPUs (trial GPUs are kept for bench runs)."""

from __future__ import annotations

from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import AggregatedTopology, DisaggregatedTopology
from reconciler.spec.words import counted


def domains(fleet: Fleet, domain_size: int) -> list[list[tuple[str, tuple[int, ...]]]]:
    """The fleet's NVLink domains in file order, each as (host, GPU indices) members.

    Hosts naming the same `domain` share one; a host without one is its own, split into
    domains of `domain_size` when it has more GPUs (a simulated host of 16 H200 is two)."""
    shared: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    found: list[list[tuple[str, tuple[int, ...]]]] = []
    for host in fleet.hosts:
        indices = tuple(range(host.gpus))
        if host.domain is not None:
            if host.domain not in shared:
                shared[host.domain] = []
                found.append(shared[host.domain])
            shared[host.domain].append((host.name, indices))
        else:
            found.extend(
                [(host.name, indices[start : start + domain_size])]
                for start in range(0, host.gpus, domain_size)
            )
    return found


def domain_capacities(fleet: Fleet, domain_size: int) -> list[int]:
    """GPUs of each NVLink domain of the fleet, largest first."""
    sizes = [sum(len(gpus) for _, gpus in domain) for domain in domains(fleet, domain_size)]
    return sorted(sizes, reverse=True)


def oversized_domains(fleet: Fleet, domain_size: int) -> list[str]:
    """Shared domains whose hosts declare more GPUs than a domain holds."""
    totals: dict[str, int] = {}
    for host in fleet.hosts:
        if host.domain is not None:
            totals[host.domain] = totals.get(host.domain, 0) + host.gpus
    return [
        f"domain {name} has {counted(gpus, 'GPU')} across its hosts; the fleet's domain size "
        f"is {domain_size}"
        for name, gpus in sorted(totals.items())
        if gpus > domain_size
    ]


def fit(
    topology: AggregatedTopology | DisaggregatedTopology, fleet: Fleet, domain_size: int
) -> list[str]:
    """Why the topology cannot run on the fleet; empty when it fits."""
    capacities = domain_capacities(fleet, domain_size)
    largest = capacities[0] if capacities else 0
    reasons: list[str] = []
    for role, pool in topology.pools():
        name = "a replica" if role == "aggregated" else f"the {role} pool"
        if pool.gpus > largest:
            reasons.append(
                f"{name} needs {counted(pool.gpus, 'GPU')} in one domain; the largest domain "
                f"of {fleet.name} has {largest}"
            )
    if reasons:
        return reasons
    serving = fleet.gpus - fleet.trial_gpus
    needed = sum(pool.replicas * pool.gpus for _, pool in topology.pools())
    if needed > serving:
        return [
            f"needs {counted(needed, 'GPU')}; {fleet.name} has {serving} for serving "
            f"({fleet.gpus} minus {fleet.trial_gpus} trial GPUs)"
        ]
    # First fit, largest replicas first: replicas never straddle domains.
    free = list(capacities)
    for gpus in sorted(
        (p.gpus for _, p in topology.pools() for _ in range(p.replicas)), reverse=True
    ):
        slot = next((i for i, room in enumerate(free) if room >= gpus), None)
        if slot is None:
            return [
                f"the replicas need {needed} of {serving} serving GPUs, but a replica of "
                f"{gpus} finds no domain of {fleet.name} with room left (domains: "
                f"{', '.join(map(str, capacities))})"
            ]
        free[slot] -= gpus
    return []
