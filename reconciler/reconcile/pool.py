"""Pure logic: a stage's pool (`replicas: {min, max, pool: stage}`) — one count over all the
stage's fleets, where each fleet of the stage otherwise keeps its own.

Each fleet keeps one replica (its endpoint answers its clients). Replicas the count adds go to
the fleet whose GPU-hour costs least, while it has room, then to the next; replicas it removes
leave the dearest fleet first. What runs never moves for it: a fleet that costs less and frees
GPUs later gets the next replica added, not those that run elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from reconciler.catalog.cost import fleet_price
from reconciler.catalog.deployments import Deployment
from reconciler.fleet.model.labels import DeploymentKey
from reconciler.spec.repo import Repo
from reconciler.spec.scaling import ReplicaBounds

POOL = "*"  # the fleet part of a pool's key (release, stage, "*"): no fleet is named so


class Counted(Protocol):
    @property
    def release(self) -> str: ...
    @property
    def stage(self) -> str: ...
    @property
    def fleet(self) -> str: ...
    @property
    def bounds(self) -> ReplicaBounds | None: ...


def pooled(deployment: Counted) -> bool:
    return deployment.bounds is not None and deployment.bounds.pool == "stage"


def count_key(deployment: Counted) -> DeploymentKey:
    """What the bot keeps a count for: the stage's pool, else the deployment on its fleet."""
    if pooled(deployment):
        return (deployment.release, deployment.stage, POOL)
    return (deployment.release, deployment.stage, deployment.fleet)


def counted(deployments: Iterable[tuple[Counted, int]]) -> dict[DeploymentKey, int]:
    """(deployment, replicas) -> each count key's replicas (a pool's summed over its fleets)."""
    found: dict[DeploymentKey, int] = {}
    for deployment, replicas in deployments:
        key = count_key(deployment)
        found[key] = found.get(key, 0) + replicas
    return found


def cheapest_first(fleets: Iterable[str], gpu_hour: Mapping[str, float | None]) -> list[str]:
    """`fleets` by what a GPU-hour costs, the cheapest first; those without a price last."""
    return sorted(fleets, key=lambda f: (gpu_hour.get(f) is None, gpu_hour.get(f) or 0.0, f))


def shares(total: int, running: Mapping[str, int], order: Sequence[str]) -> dict[str, int]:
    """Each fleet's replicas before those `total` adds: what runs there (at least one), less
    what `total` leaves out, taken from the dearest fleets first (`order`: cheapest first)
    down to one each. The count still to add is `total` less their sum."""
    counts = {fleet: max(1, running.get(fleet, 0)) for fleet in order}
    excess = sum(counts.values()) - total
    for fleet in reversed(order):
        cut = min(max(excess, 0), counts[fleet] - 1)
        counts[fleet] -= cut
        excess -= cut
    return counts


class StagePools:
    """One pass's stage pools while their fleets are placed, the cheapest fleets first: each
    fleet is asked for its share and what the fleets before it could not place; what no fleet
    placed is pending (shown on the dearest, never counted)."""

    def __init__(
        self, head: Repo, wanted: Sequence[Deployment], counts: Mapping[DeploymentKey, int]
    ) -> None:
        names = {d.fleet for d in wanted}
        self._order = sorted(names)  # no pool: the fleets' order, and no price looked up
        if any(pooled(d) for d in wanted):
            known = names & set(head.fleets)
            prices = {name: fleet_price(head, head.fleets[name]) for name in known}
            gpu_hour = {name: p.gpu_hour if p else None for name, p in prices.items()}
            self._order = cheapest_first(names, gpu_hour)
        members: dict[DeploymentKey, tuple[ReplicaBounds, set[str]]] = {}
        for deployment in wanted:
            if pooled(deployment) and deployment.bounds is not None:
                key = count_key(deployment)
                members.setdefault(key, (deployment.bounds, set()))[1].add(deployment.fleet)
        self._shares: dict[DeploymentKey, dict[str, int]] = {}
        self._carry: dict[DeploymentKey, int] = {}
        for key, (bounds, fleets) in members.items():
            order = [f for f in self._order if f in fleets]
            running = {f: counts.get((key[0], key[1], f), 0) for f in order}
            # the count the bot keeps, else what runs (a bot that starts reads it from there)
            total = bounds.clamp(counts.get(key, sum(running.values())))
            self._shares[key] = shares(total, running, order)
            self._carry[key] = max(0, total - sum(self._shares[key].values()))

    def order(self, fleets: Iterable[str]) -> list[str]:
        """`fleets` in the order they are placed: the cheapest first."""
        wanted = set(fleets)
        return [f for f in self._order if f in wanted]

    def asks(self, deployment: Counted) -> int:
        """The replicas a pool's fleet is asked for: its share, and what did not fit before."""
        key = count_key(deployment)
        return self._shares[key].get(deployment.fleet, 1) + self._carry[key]

    def placed(self, deployment: Counted, replicas: int) -> None:
        """`replicas` fit on the deployment's fleet: the rest is asked of the next fleet."""
        key = count_key(deployment)
        self._carry[key] = max(0, self.asks(deployment) - replicas)

    def unplaced(self) -> dict[DeploymentKey, int]:
        """Each pool's replicas that fit on none of its fleets (pending)."""
        return {key: carry for key, carry in self._carry.items() if carry}
