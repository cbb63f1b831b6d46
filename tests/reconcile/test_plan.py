"""The plan: desired units (from real git revisions) against what the agents report, as
start / replace / stop / keep actions in a fixed order, with GPUs before and after."""

from __future__ import annotations

import random

from reconciler.fleet.model.observed import UnitRecord
from reconciler.reconcile.desired import Desired
from reconciler.reconcile.plan import ActionKind, Plan, Wave, plan
from tests.reconcile.conftest import (
    GitRepo,
    add_release,
    applied,
    desired_of,
    kinds,
    observation,
    plan_of,
)

RELEASE = "releases/chat-8b/denv.yaml"
ENGINE_0, ENGINE_1, ENGINE_2 = (f"chat-8b.canary.local.aggregated-{i}" for i in range(3))
ROUTER = "chat-8b.canary.local.router"


def running(repo: GitRepo) -> list[tuple[str, UnitRecord]]:
    """What the agents report once the repository's current head has been applied."""
    return applied(desired_of(repo, {"local": observation([])}))


def real_engines(repo: GitRepo) -> None:
    """The local fleet as real GPUs: units run vLLM itself, not the simulator (whose spec
    carries the whole recipe, replica count included, so scaling rolls every replica)."""
    repo.replace("fleets/local.yaml", "simulated: true", "simulated: false")
    repo.commit("vLLM itself")


def group(result: Plan, release: str = "chat-8b") -> tuple[int, int, str | None]:
    (found,) = [g for g in result.groups if g.release == release]
    return found.gpus_before, found.gpus_after, found.error


def test_a_fresh_deploy_starts_engines_then_the_router(git_repo: GitRepo) -> None:
    result = plan_of(git_repo, [])
    assert kinds(result) == [("start", ENGINE_0), ("start", ENGINE_1), ("start", ROUTER)]
    assert {a.wave for a in result.actions} == {Wave.START}
    assert all(a.desired is not None and a.reason == "new" for a in result.actions)
    assert group(result) == (0, 2, None)
    (fleet,) = result.fleets
    assert (fleet.fleet, fleet.gpus, fleet.trial_gpus, fleet.before, fleet.after) == (
        "local", 16, 8, 0, 2,
    )  # fmt: skip
    assert result.counts == {"start": 3, "stop": 0, "replace": 0, "keep": 0}
    assert not result.empty


def test_what_already_runs_as_desired_is_a_no_op(git_repo: GitRepo) -> None:
    result = plan_of(git_repo, running(git_repo))
    assert result.empty and kinds(result) == []
    assert result.counts["keep"] == 3
    assert group(result) == (2, 2, None)
    assert result.groups[0].running_revisions == (str(git_repo.git.head.target),)


def test_scale_up_starts_a_replica_and_keeps_the_router(git_repo: GitRepo) -> None:
    real_engines(git_repo)
    before = running(git_repo)
    git_repo.replace(RELEASE, "replicas: 2", "replicas: 3")
    git_repo.commit("three replicas")
    result = plan_of(git_repo, before)
    # the router's workers follow through its API (apply), so the endpoint never restarts
    assert kinds(result) == [("start", ENGINE_2)]
    assert group(result) == (2, 3, None)


def test_scale_down_stops_the_replica_after_the_router_sync(git_repo: GitRepo) -> None:
    real_engines(git_repo)
    before = running(git_repo)
    git_repo.replace(RELEASE, "replicas: 2", "replicas: 1")
    git_repo.commit("one replica")
    result = plan_of(git_repo, before)
    assert kinds(result) == [("stop", ENGINE_1)]
    stop = next(a for a in result.actions if a.kind == ActionKind.STOP)
    assert (stop.wave, stop.reason, stop.gpus_before) == (
        Wave.TRIM, "no longer part of the deployment", (1,),
    )  # fmt: skip
    assert group(result) == (2, 1, None)


def test_a_setting_change_replaces_each_replica_naming_the_setting(git_repo: GitRepo) -> None:
    before = running(git_repo)
    git_repo.replace(RELEASE, "max_batch: 128", "max_batch: 256")
    git_repo.commit("bigger batches")
    result = plan_of(git_repo, before)
    assert kinds(result) == [("replace", ENGINE_0), ("replace", ENGINE_1)]
    for action in result.actions[:2]:
        assert action.wave == Wave.ROLL and action.surge is True  # 6 free GPUs beside the plan
        assert [(c.name, c.old, c.new) for c in action.changes] == [
            ("--spec-json recipe.settings.max_batch", "128", "256")
        ]
        assert action.gpus_before == action.gpus_after
    assert result.actions[2].kind == ActionKind.KEEP  # the router's workers did not move


def test_on_real_engines_the_changed_flag_is_named(git_repo: GitRepo) -> None:
    real_engines(git_repo)
    before = running(git_repo)
    git_repo.replace(RELEASE, "max_batch: 128", "max_batch: 256")
    git_repo.commit("bigger batches")
    replace = plan_of(git_repo, before).actions[0]
    assert replace.kind == ActionKind.REPLACE
    assert [(c.field, c.name, c.old, c.new) for c in replace.changes] == [
        ("argv", "--max-num-seqs", "128", "256")
    ]


def test_a_removed_release_is_an_orphan_left_running(git_repo: GitRepo) -> None:
    before = running(git_repo)
    add_release(git_repo, "other", replicas=1)
    git_repo.remove("releases/chat-8b")
    git_repo.commit("retire chat-8b")
    result = plan_of(git_repo, before)
    assert [a for a in result.actions if a.release == "chat-8b"] == []
    assert [(o.unit, o.reason, o.prune) for o in result.orphans] == [
        (unit, "release chat-8b was removed", False) for unit in (ENGINE_0, ENGINE_1, ROUTER)
    ]
    assert group(result) == (2, 2, None)  # its GPUs stay held
    assert result.groups[0].orphaned
    # The new release was placed beside them, never on their GPUs.
    held = {gpu for orphan in result.orphans for gpu in orphan.gpus}
    (other,) = [a for a in result.actions if a.release == "other" and a.role != "router"]
    assert held and not held & set(other.gpus_after)


def test_a_removed_release_is_stopped_router_first_where_its_fleet_prunes(
    git_repo: GitRepo,
) -> None:
    before = running(git_repo)
    add_release(git_repo, "other", replicas=1)
    git_repo.remove("releases/chat-8b")
    git_repo.replace(
        "fleets/local.yaml", "  simulated: true\n", "  simulated: true\n  prune: true\n"
    )
    git_repo.commit("retire chat-8b; the fleet prunes")
    result = plan_of(git_repo, before)
    stops = [a for a in result.actions if a.release == "chat-8b"]
    assert [(a.kind.value, a.unit) for a in stops] == [
        ("stop", ROUTER), ("stop", ENGINE_0), ("stop", ENGINE_1),
    ]  # fmt: skip
    why = "release chat-8b was removed; orphan, pruned"
    assert {(a.wave, a.reason) for a in stops} == {(Wave.FREE, why)}
    assert {o.prune for o in result.orphans} == {True}
    assert group(result) == (2, 0, None)
    assert result.groups[0].revision is None
    # The new release was placed on the GPUs the stops free (they come first).
    other = [a for a in result.actions if a.release == "other"]
    assert other[0].gpus_after == (0,)
    assert [a.wave for a in result.actions].index(Wave.FREE) == 0


def test_units_denv_did_not_start_are_never_touched(git_repo: GitRepo) -> None:
    bench = UnitRecord(id="bench-1", digest="b", gpus=(5,), pid=7, alive=True)
    elsewhere = UnitRecord(
        id="chat-8b.canary.gpu-box.aggregated-0",
        digest="x",
        gpus=(6,),
        pid=8,
        alive=True,
        labels={"release": "chat-8b", "stage": "canary", "fleet": "gpu-box"},
    )
    records = [*running(git_repo), ("localhost", bench), ("localhost", elsewhere)]
    result = plan_of(git_repo, records)
    assert result.empty
    assert {a.unit for a in result.actions} == {ENGINE_0, ENGINE_1, ROUTER}


def test_a_deployment_that_no_longer_fits_is_left_running_and_reported(
    git_repo: GitRepo,
) -> None:
    add_release(git_repo, "big", replicas=6)
    git_repo.commit("a second release")
    before = running(git_repo)  # both run: 8 of the 8 GPUs that are not for trials
    git_repo.replace(RELEASE, "replicas: 2", "replicas: 3")
    git_repo.replace("releases/big/denv.yaml", "max_batch: 64", "max_batch: 32")
    git_repo.commit("chat-8b wants one more GPU than there is")
    result = plan_of(git_repo, before)
    before_gpus, after_gpus, error = group(result)
    assert (before_gpus, after_gpus) == (2, 2)
    assert error is not None and error.startswith("replica 2 needs 1 GPU in one domain")
    assert all(a.release == "big" for a in result.actions)  # nothing of chat-8b is touched
    replaces = [a for a in result.actions if a.kind == ActionKind.REPLACE]
    assert len(replaces) == 6 and not any(a.surge for a in replaces)  # no free GPU: in place


def test_an_exited_unit_is_started_again(git_repo: GitRepo) -> None:
    records = running(git_repo)
    host, dead = records[0]
    records[0] = (host, dead.model_copy(update={"alive": False, "exit_code": 1}))
    result = plan_of(git_repo, records)
    assert kinds(result) == [("start", ENGINE_0)]
    assert result.actions[0].reason == "exited with code 1; start it again"
    assert result.actions[0].gpus_after == (0,)


def test_the_order_does_not_depend_on_how_hosts_answered(git_repo: GitRepo) -> None:
    add_release(git_repo, "alpha", replicas=2)
    git_repo.commit("a second release")
    before = running(git_repo)
    git_repo.replace(RELEASE, "max_batch: 128", "max_batch: 256")
    git_repo.remove("releases/alpha")
    git_repo.replace(
        "fleets/local.yaml", "  simulated: true\n", "  simulated: true\n  prune: true\n"
    )
    git_repo.commit("change one, remove the other (the fleet prunes its orphans)")
    seen = observation(before)
    desired: Desired = desired_of(git_repo, {"local": seen})
    first = plan(desired, {"local": {"localhost": tuple(r for _, r in before)}})
    shuffled = [r for _, r in before]
    random.Random(7).shuffle(shuffled)
    assert plan(desired, {"local": {"localhost": tuple(shuffled)}}) == first
    assert [(a.release, a.wave) for a in first.actions if a.kind != ActionKind.KEEP] == [
        ("alpha", Wave.FREE), ("alpha", Wave.FREE), ("alpha", Wave.FREE),
        ("chat-8b", Wave.ROLL), ("chat-8b", Wave.ROLL),
    ]  # fmt: skip
