"""A running loop's memo of resolved deployments: a steady pass builds no unit again and
resolves exactly what a fresh resolution does; any changed input builds afresh."""

from __future__ import annotations

import pytest

from reconciler.engines import launch
from reconciler.fleet.drivers.registry import rules_of
from reconciler.reconcile.desired import Desired, DesiredMemo, desired_units
from reconciler.reconcile.plan import plan
from tests.reconcile.conftest import GitRepo, add_release, applied, observation


def resolve(repo: GitRepo, seen: dict, memo: DesiredMemo | None) -> Desired:  # type: ignore[type-arg]
    source = repo.source()
    stages = source.stages(source.resolve())
    return desired_units(stages, source.repo_at, seen, rules=rules_of, memo=memo)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The deployments whose units were built (engine cards asked)."""
    names: list[str] = []
    real = launch.launch_units

    def counted(deployment, fleet, placement, context):  # type: ignore[no-untyped-def]
        names.append(deployment.release)
        return real(deployment, fleet, placement, context)

    monkeypatch.setattr("reconciler.fleet.placement.placer.launch_units", counted)
    return names


def test_a_steady_pass_builds_nothing_and_resolves_what_a_fresh_one_does(
    git_repo: GitRepo, built: list[str]
) -> None:
    add_release(git_repo, "second", replicas=2)
    git_repo.commit("a second release")
    memo = DesiredMemo()
    first = resolve(git_repo, {}, memo)
    seen = {"local": observation(applied(first))}
    warm = resolve(git_repo, seen, memo)  # the pass after the apply: placed where they run
    built.clear()
    steady = resolve(git_repo, seen, memo)
    assert built == []
    assert steady == resolve(git_repo, seen, None) == warm
    assert plan(steady, {"local": {h: o.units for h, o in seen["local"].hosts.items()}}).empty


def test_a_changed_release_or_host_is_built_again(git_repo: GitRepo, built: list[str]) -> None:
    add_release(git_repo, "second", replicas=2)
    git_repo.commit("a second release")
    memo = DesiredMemo()
    seen = {"local": observation(applied(resolve(git_repo, {}, memo)))}
    resolve(git_repo, seen, memo)

    git_repo.replace("releases/second/denv.yaml", "max_batch: 64", "max_batch: 32")
    git_repo.commit("second: smaller batches")
    built.clear()
    changed = resolve(git_repo, seen, memo)
    assert sorted(set(built)) == ["second"]  # only the release that changed
    assert changed == resolve(git_repo, seen, None)

    records = applied(changed)
    elsewhere = [  # as if an earlier bot had placed them on the upper GPUs
        (host, r.model_copy(update={"gpus": tuple(g + 8 for g in r.gpus)})) for host, r in records
    ]
    seen = {"local": observation(elsewhere)}
    built.clear()
    moved = resolve(git_repo, seen, memo)  # placed where they run now: built afresh
    assert sorted(set(built)) == sorted({r.labels["release"] for _, r in records})
    assert moved == resolve(git_repo, seen, None) != changed
