"""Elastic deployments in the desired state: the count read from the fleets, a count chosen
inside the bounds, replicas that do not fit left pending, and room to grow that keeps a
deployment (its router: its endpoint) where it runs when it scales up."""

from __future__ import annotations

from reconciler.engines.placement import PORT_BLOCK
from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.model.labels import DeploymentKey
from reconciler.fleet.model.observed import FleetObservation
from reconciler.reconcile.desired import (
    Desired,
    DesiredDeployment,
    desired_units,
    running_replicas,
)
from reconciler.reconcile.plan import plan
from reconciler.spec.scaling import ReplicaBounds
from tests.labs.release import release_yaml, stage
from tests.reconcile.conftest import GitRepo, applied, observation

CHAT = ("chat-8b", "canary", "local")
CODE = ("code-8b", "canary", "local")


def elastic(repo: GitRepo, name: str, low: int, high: int) -> None:
    bounds = f"replicas: {{ min: {low}, max: {high} }}"
    text = release_yaml(stage("canary", "local", bounds), model=name, replicas=low)
    repo.write(f"releases/{name}/denv.yaml", text)


def desired_at(
    repo: GitRepo,
    seen: FleetObservation | None = None,
    counts: dict[DeploymentKey, int] | None = None,
) -> Desired:
    source = repo.source()
    stages = source.stages(source.resolve())
    observed = {"local": seen} if seen is not None else {}
    return desired_units(stages, source.repo_at, observed, rules=rules_of, counts=counts)


def by_key(desired: Desired) -> dict[tuple[str, str, str], DesiredDeployment]:
    assert not desired.errors, desired.errors
    return {d.key: d for d in desired.deployments}


def ports(deployment: DesiredDeployment) -> dict[str, int | None]:
    return {u.id: u.unit.port for u in deployment.units}


def test_a_count_inside_the_bounds_is_placed_and_read_back_from_the_fleet(
    git_repo: GitRepo,
) -> None:
    elastic(git_repo, "chat-8b", 1, 4)
    git_repo.commit("chat-8b: 1–4 replicas")
    first = by_key(desired_at(git_repo))[CHAT]
    assert (first.replicas, first.bounds, first.pending_replicas) == (
        1,
        ReplicaBounds(min=1, max=4),
        0,
    )
    three = by_key(desired_at(git_repo, counts={CHAT: 3}))[CHAT]
    seen = observation(applied(Desired(head="x", deployments=(three,))))
    assert running_replicas({"local": seen}) == {CHAT: 3}
    again = by_key(desired_at(git_repo, seen))[CHAT]  # no count given: as many as run
    assert again.replicas == 3 and ports(again) == ports(three)
    running = {"local": {host: found.units for host, found in seen.hosts.items()}}
    actions = plan(desired_at(git_repo, seen), running).actions
    assert [a for a in actions if a.kind.value != "keep"] == []  # inside the bounds: no drift
    clamped = by_key(desired_at(git_repo, seen, counts={CHAT: 9}))[CHAT]
    assert clamped.replicas == 4


def test_replicas_that_do_not_fit_are_pending(git_repo: GitRepo) -> None:
    elastic(git_repo, "chat-8b", 1, 8)
    git_repo.commit("chat-8b: 1–8 replicas")
    seen = observation([], hosts={"localhost": 11}, busy={"localhost": set()})
    found = by_key(desired_at(git_repo, seen, counts={CHAT: 5}))[CHAT]
    assert (found.replicas, found.pending_replicas) == (3, 2)


def test_scaling_up_keeps_the_router_where_it_runs_beside_another_deployment(
    git_repo: GitRepo,
) -> None:
    """Two elastic deployments on one host, placed one after the other: the first grows to
    its max on the ports it was given, so neither its router (the endpoint clients use) nor
    its running replica moves."""
    elastic(git_repo, "chat-8b", 1, 3)
    elastic(git_repo, "code-8b", 1, 3)
    git_repo.commit("two elastic releases")
    placed = desired_at(git_repo)
    seen = observation(applied(placed))
    before = by_key(placed)
    for count in (2, 3):
        grown = by_key(desired_at(git_repo, seen, counts={CHAT: count}))
        assert grown[CHAT].replicas == count
        kept = ports(grown[CHAT])
        assert {i: kept[i] for i in ports(before[CHAT])} == ports(before[CHAT]), count
        assert ports(grown[CODE]) == ports(before[CODE])
    routers = sorted(
        p for d in before.values() for i, p in ports(d).items() if i.endswith("router")
    )
    assert routers[1] - routers[0] >= PORT_BLOCK * 4  # the router's block and three replicas'


def test_a_fixed_count_is_placed_before_an_elastic_one_grows(git_repo: GitRepo) -> None:
    """chat-8b (elastic, placed first by name) asks for every serving GPU; code-8b runs a
    fixed replica: it gets its GPU, and chat-8b the rest, one replica pending."""
    elastic(git_repo, "chat-8b", 1, 3)
    git_repo.write("releases/code-8b/denv.yaml", release_yaml(model="code-8b", replicas=1))
    git_repo.commit("an elastic release beside a fixed one")
    seen = observation([], hosts={"localhost": 11}, busy={"localhost": set()})
    found = by_key(desired_at(git_repo, seen, counts={CHAT: 3}))
    assert found[CODE].replicas == 1
    assert (found[CHAT].replicas, found[CHAT].pending_replicas) == (2, 1)


def test_an_elastic_deployment_grows_only_where_the_next_ones_minimum_still_fits(
    git_repo: GitRepo,
) -> None:
    """chat-8b (placed first by name) asks for every serving GPU; code-8b, elastic too,
    runs nothing yet: it still gets its minimum, and chat-8b the rest, one replica pending
    (not code-8b refused for want of a GPU)."""
    elastic(git_repo, "chat-8b", 1, 3)
    elastic(git_repo, "code-8b", 1, 3)
    git_repo.commit("two elastic releases")
    seen = observation([], hosts={"localhost": 11}, busy={"localhost": set()})
    found = by_key(desired_at(git_repo, seen, counts={CHAT: 3}))
    assert (found[CODE].replicas, found[CODE].pending_replicas) == (1, 0)
    assert (found[CHAT].replicas, found[CHAT].pending_replicas) == (2, 1)
