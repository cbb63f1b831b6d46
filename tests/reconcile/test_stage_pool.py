"""A stage's pool (`pool: stage`) in the desired state: one count over the stage's fleets,
one replica kept on each, the others added where a GPU-hour costs least while it has room and
removed from the dearest first; what runs never moves for it."""

from __future__ import annotations

from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.model.labels import DeploymentKey
from reconciler.fleet.model.observed import FleetObservation
from reconciler.reconcile.desired import Desired, desired_units
from reconciler.reconcile.plan import plan
from reconciler.reconcile.pool import POOL, cheapest_first, shares
from tests.labs.release import release_yaml, stage
from tests.reconcile.conftest import GitRepo, applied, observation

POOLED = ("chat-8b", "canary", POOL)
# gpus of each fleet's one host; the dear fleet is named first in the stage: order is by price
FLEETS = {"dear": (9.0, 3), "cheap": (1.2, 2)}


def fleet_yaml(name: str, price: float, gpus: int, address: str) -> str:
    return (
        f"fleet:\n  name: {name}\n  provider: test\n  hardware: h200\n  simulated: true\n"
        f"  transport: local\n  price: {{ gpu_hour: {price} }}\n"
        f"  hosts:\n    - {{ name: localhost, address: {address}, gpus: {gpus} }}\n"
    )


def pooled_repo(repo: GitRepo, low: int = 2, high: int = 6) -> None:
    for number, (name, (price, gpus)) in enumerate(FLEETS.items()):
        repo.write(f"fleets/{name}.yaml", fleet_yaml(name, price, gpus, f"127.0.9.{number + 1}"))
    bounds = f"replicas: {{ min: {low}, max: {high}, pool: stage }}"
    repo.write("releases/chat-8b/denv.yaml", release_yaml(stage("canary", "dear, cheap", bounds)))
    repo.commit(f"chat-8b: a pool of {low}–{high} replicas over dear and cheap")


def desired_at(
    repo: GitRepo,
    seen: dict[str, FleetObservation] | None = None,
    counts: dict[DeploymentKey, int] | None = None,
) -> Desired:
    source = repo.source()
    stages = source.stages(source.resolve())
    return desired_units(stages, source.repo_at, seen or {}, rules=rules_of, counts=counts)


def running(desired: Desired) -> dict[str, FleetObservation]:
    """Each fleet as its agents report it once `desired` runs there."""
    found = {}
    for name, (_, gpus) in FLEETS.items():
        mine = tuple(d for d in desired.deployments if d.fleet == name)
        records = applied(Desired(head="x", deployments=mine))
        found[name] = observation(records, fleet=name, hosts={"localhost": gpus})
    return found


def spread(desired: Desired) -> dict[str, tuple[int, int]]:
    """fleet -> (replicas placed, replicas pending)."""
    assert not desired.errors, desired.errors
    return {d.fleet: (d.replicas, d.pending_replicas) for d in desired.deployments}


def test_replicas_added_go_to_the_cheapest_fleet_while_it_has_room_then_the_next(
    git_repo: GitRepo,
) -> None:
    pooled_repo(git_repo)
    first = desired_at(git_repo)
    assert spread(first) == {"cheap": (1, 0), "dear": (1, 0)}  # one each: the minimum of 2
    assert [d.fleet for d in first.deployments] == ["cheap", "dear"]  # the fleets' order
    three = desired_at(git_repo, running(first), {POOLED: 3})
    assert spread(three) == {"cheap": (2, 0), "dear": (1, 0)}
    four = desired_at(git_repo, running(three), {POOLED: 4})  # cheap is full (2 GPUs)
    assert spread(four) == {"cheap": (2, 0), "dear": (2, 0)}
    six = desired_at(git_repo, running(four), {POOLED: 6})  # 5 GPUs in all: one pending
    assert spread(six) == {"cheap": (2, 0), "dear": (3, 1)}
    assert desired_at(git_repo, running(four), {POOLED: 9}) == six  # within the bounds (max 6)


def test_replicas_removed_leave_the_dearest_fleet_first_down_to_one_each(
    git_repo: GitRepo,
) -> None:
    pooled_repo(git_repo)
    four = desired_at(git_repo, running(desired_at(git_repo)), {POOLED: 4})
    four = desired_at(git_repo, running(four), {POOLED: 4})
    assert spread(four) == {"cheap": (2, 0), "dear": (2, 0)}
    three = desired_at(git_repo, running(four), {POOLED: 3})
    assert spread(three) == {"cheap": (2, 0), "dear": (1, 0)}
    two = desired_at(git_repo, running(three), {POOLED: 1})  # clamped to the minimum
    assert spread(two) == {"cheap": (1, 0), "dear": (1, 0)}


def test_what_runs_never_moves_and_a_count_inside_the_bounds_is_no_drift(
    git_repo: GitRepo,
) -> None:
    """Three replicas on the dear fleet, one on the cheap (it was full when they came): a bot
    that starts reads 4 from the fleets and moves none; the next one added goes to cheap."""
    pooled_repo(git_repo)
    dear_three = desired_at(git_repo, None, {("chat-8b", "canary", "dear"): 3, POOLED: 4})
    assert spread(dear_three) == {"cheap": (1, 0), "dear": (3, 0)}
    seen = running(dear_three)
    again = desired_at(git_repo, seen)  # no count given: as many as run
    assert spread(again) == {"cheap": (1, 0), "dear": (3, 0)}
    records = {name: {h: o.units for h, o in found.hosts.items()} for name, found in seen.items()}
    changes = [a for a in plan(again, records).actions if a.kind.value != "keep"]
    assert changes == []
    five = desired_at(git_repo, seen, {POOLED: 5})
    assert spread(five) == {"cheap": (2, 0), "dear": (3, 0)}
    groups = {g.fleet: g.scale for g in plan(five, records).groups}
    assert groups == {"cheap": "2 of the stage's 5 (2–6)", "dear": "3 of the stage's 5 (2–6)"}


def test_shares_and_price_order() -> None:
    order = cheapest_first(["b", "a", "c", "d"], {"a": 3.0, "b": 1.0, "c": None, "d": 3.0})
    assert order == ["b", "a", "d", "c"]  # by price, then name; no price: last
    assert shares(6, {"b": 1, "a": 1}, ["b", "a"]) == {"b": 1, "a": 1}  # 4 still to add
    assert shares(2, {"b": 2, "a": 3}, ["b", "a"]) == {"b": 1, "a": 1}
    assert shares(4, {"b": 2, "a": 3}, ["b", "a"]) == {"b": 2, "a": 2}  # the dearest gives
    assert shares(3, {}, ["b", "a"]) == {"b": 1, "a": 1}  # nothing runs: one each
