"""The autoscaler of a bot that starts again (rollout/autoscale.py): the count the last bot
asked for comes from its lease note — replicas that never came stay asked for, never fewer
than run — unless nothing of the stage runs any more (removed from git, then back: it starts
afresh at its minimum). A real git repository; no engine answers (no signal: steady)."""

from __future__ import annotations

from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.model.observed import FleetObservation
from reconciler.reconcile.desired import Desired, desired_units
from reconciler.rollout.autoscale import Autoscaler
from tests.labs.elastic import elastic_release
from tests.reconcile.conftest import GitRepo, applied, git_repo, observation

__all__ = ["git_repo"]  # the fixture

KEY = ("chat-8b", "canary", "local")


def note(count: int) -> dict[str, object]:
    """The scaling part of the last bot's lease note: it asked for `count` replicas."""
    deployment = {"count": count, "reason": "2 requests waiting on a replica", "events": []}
    return {"version": 1, "counters": {}, "deployments": {"/".join(KEY): deployment}}


def fleets(repo: GitRepo, replicas: int) -> tuple[Desired, dict[str, FleetObservation]]:
    """The desired state as a pass builds it first (at the count that runs) when `replicas`
    of the stage run on the local fleet."""
    source = repo.source()
    stages = source.stages(source.resolve())
    running = desired_units(stages, source.repo_at, {}, rules=rules_of, counts={KEY: replicas})
    seen = {"local": observation(applied(running) if replicas else [])}
    return desired_units(stages, source.repo_at, seen, rules=rules_of), seen


def test_a_restarted_bot_keeps_asking_for_the_replicas_that_never_came(
    git_repo: GitRepo,
) -> None:
    elastic_release(git_repo, "local", high=4)
    desired, seen = fleets(git_repo, 2)
    counts = Autoscaler(git_repo.source(), timeout=0.2)(desired, seen, {"scaling": note(3)})
    assert counts == {KEY: 3}


def test_never_fewer_than_run(git_repo: GitRepo) -> None:
    elastic_release(git_repo, "local", high=4)
    desired, seen = fleets(git_repo, 2)
    counts = Autoscaler(git_repo.source(), timeout=0.2)(desired, seen, {"scaling": note(1)})
    assert counts == {KEY: 2}


def test_a_stage_nothing_of_which_runs_starts_at_its_minimum(git_repo: GitRepo) -> None:
    elastic_release(git_repo, "local", high=4)
    desired, seen = fleets(git_repo, 0)
    counts = Autoscaler(git_repo.source(), timeout=0.2)(desired, seen, {"scaling": note(3)})
    assert counts == {KEY: 1}


def test_a_restarted_bot_takes_a_replicas_capacity_from_the_note(git_repo: GitRepo) -> None:
    """A capacity search takes seconds: the figure goes into the note, and a bot that starts
    again (each --once run) reads it there instead of searching again."""
    elastic_release(git_repo, "local", high=4)
    desired, seen = fleets(git_repo, 1)
    [deployment] = desired.deployments
    repo = git_repo.source()
    first = Autoscaler(repo, timeout=0.2)
    policy = first.source.repo_at(desired.head).policies.scaling["default"]
    searched = first._capacity(deployment, policy, (512, 256))
    assert searched is not None and searched > 0
    kept = first.state()
    [(key, value)] = kept["capacities"].items()
    assert value == searched
    kept["capacities"][key] = 123.0  # what the last bot found, as its note says
    again = Autoscaler(git_repo.source(), timeout=0.2)
    again(desired, seen, {"scaling": kept})
    assert again._capacity(deployment, policy, (512, 256)) == 123.0
    assert again._capacity(deployment, policy, (1024, 256)) != 123.0  # another shape: searched
