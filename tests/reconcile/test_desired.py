"""The desired state: every unit a running stage wants, with its id, labels, digest, host,
GPUs and ports — placed beside what runs, one deployment's failure reported for it alone."""

from __future__ import annotations

import sys

from reconciler.engines.placement import PORT_BLOCK
from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.launching import unit_digest
from reconciler.fleet.model.observed import UnitRecord
from reconciler.reconcile.desired import Desired, DesiredDeployment, fleets_of, observed_units
from reconciler.reconcile.plan import plan
from reconciler.spec.fleet import Fleet, Host
from reconciler.spec.loader import open_repo
from tests.reconcile.conftest import GitRepo, add_release, applied, desired_of, observation


def layout(deployment: DesiredDeployment) -> list[tuple[str, str, list[int], int | None]]:
    return [(u.id, u.host, u.unit.gpu_indices, u.unit.port) for u in deployment.units]


def only(desired: Desired) -> DesiredDeployment:
    assert not desired.errors, desired.errors
    (deployment,) = desired.deployments
    return deployment


def test_a_fresh_deploy_places_every_unit_with_labels_and_a_launch_payload(
    git_repo: GitRepo,
) -> None:
    head = str(git_repo.git.head.target)
    desired = desired_of(git_repo)
    canary = only(desired)
    assert (canary.release, canary.stage, canary.fleet, canary.revision) == (
        "chat-8b", "canary", "local", head,
    )  # fmt: skip
    assert layout(canary) == [
        ("chat-8b.canary.local.aggregated-0", "localhost", [0], 8000 + PORT_BLOCK),
        ("chat-8b.canary.local.aggregated-1", "localhost", [1], 8000 + 2 * PORT_BLOCK),
        ("chat-8b.canary.local.router", "localhost", [], 8000),
    ]
    assert canary.endpoint == "http://127.0.0.1:8000"
    engine = canary.units[0]
    assert engine.labels == {
        "release": "chat-8b",
        "stage": "canary",
        "fleet": "local",
        "revision": head,
        "role": "aggregated",
        "replica": "0",
        "node": "0",
    }
    assert engine.unit.engine == "sim" and engine.replica_gpus == 1
    assert canary.units[2].replica_gpus == 0
    payload = engine.payload()
    assert payload["id"] == engine.id and payload["labels"] == engine.labels
    assert payload["digest"] == engine.digest == unit_digest(engine.unit)
    assert payload["argv"][:2] == [sys.executable, "-m"]  # the local fleet: this interpreter
    assert [p.stage for p in desired.pending] == ["prod"]
    capacity = desired.fleets["local"]
    assert (capacity.gpus, capacity.trial_gpus, capacity.observed) == (16, 8, False)
    assert capacity.room == {1: True}


def test_two_stages_on_one_fleet_share_neither_gpus_nor_ports(git_repo: GitRepo) -> None:
    git_repo.pin("chat-8b", "prod", str(git_repo.git.head.target))
    git_repo.commit("promote to prod")
    desired = desired_of(git_repo)
    assert not desired.errors
    canary, prod = desired.deployments
    assert prod.stage == "prod"
    gpus = [i for d in (canary, prod) for u in d.units for i in u.unit.gpu_indices]
    ports = [
        port
        for d in (canary, prod)
        for u in d.units
        if u.unit.port is not None
        for port in range(u.unit.port, u.unit.port + PORT_BLOCK)
    ]
    assert sorted(gpus) == [0, 1, 2, 3]
    assert len(ports) == len(set(ports)) == 6 * PORT_BLOCK
    assert len({u.id for d in (canary, prod) for u in d.units}) == 6


def test_running_units_keep_their_gpus_and_ports(git_repo: GitRepo) -> None:
    first = desired_of(git_repo)
    records = applied(first)
    # As if placed in another pass: GPUs 5 and 3, ports from 9000.
    moved = []
    for (host, record), gpu in zip(records, ([5], [3], []), strict=True):
        port = record.port + 1000 if record.port else None
        moved.append((host, record.model_copy(update={"gpus": tuple(gpu), "port": port})))
    again = only(desired_of(git_repo, {"local": observation(moved)}))
    assert [(u.unit.gpu_indices, u.unit.port) for u in again.units] == [
        ([5], 9000 + PORT_BLOCK),
        ([3], 9000 + 2 * PORT_BLOCK),
        ([], 9000),
    ]


def test_units_denv_did_not_start_and_busy_gpus_are_avoided(git_repo: GitRepo) -> None:
    bench = UnitRecord(id="bench-1", digest="b", port=8032, gpus=(0,), pid=7, alive=True)
    other = UnitRecord(
        id="gone.canary.local.aggregated-0",
        digest="g",
        port=8064,
        gpus=(1,),
        pid=8,
        alive=True,
        labels={"release": "gone", "stage": "canary", "fleet": "local"},
    )
    seen = observation([("localhost", bench), ("localhost", other)], busy={"localhost": {2}})
    canary = only(desired_of(git_repo, {"local": seen}))
    # GPU 0 and ports from 8032 are the bench unit's, GPU 2 a foreign process's; the unit
    # of a removed release is an orphan, left running (its fleet does not prune), so its GPU
    # 1 and port 8064 stay held. The first base whose blocks are all free is 8096.
    assert [(u.unit.gpu_indices, u.unit.port) for u in canary.units] == [
        ([3], 8128),
        ([4], 8160),
        ([], 8096),
    ]


def test_ports_another_program_listens_on_are_avoided(git_repo: GitRepo) -> None:
    # 8040 (inside the first block) is some other program's; the unit's own 8096 block is
    # its own (its engine listens there), so only the block with 8040 is skipped.
    unit = UnitRecord(id="bench-1", digest="b", port=8096, gpus=(0,), pid=7, alive=True)
    seen = observation([("localhost", unit)], listening={"localhost": {8040, 8096, 8097}})
    canary = only(desired_of(git_repo, {"local": seen}))
    ports = sorted(u.unit.port or 0 for u in canary.units)
    assert ports == [8128, 8160, 8192]  # router block first, then one block per replica


def test_one_deployment_that_does_not_fit_leaves_the_others_planned(git_repo: GitRepo) -> None:
    running = applied(desired_of(git_repo))
    add_release(git_repo, "big", replicas=7)
    git_repo.commit("a big release")
    fresh = desired_of(git_repo)  # nothing runs: by name, big first; chat-8b misses a GPU
    assert [d.release for d in fresh.deployments] == ["big"]
    (error,) = fresh.errors
    assert (error.release, error.stage, error.fleet) == ("chat-8b", "canary", "local")
    assert error.message.startswith("replica 1 needs 1 GPU in one domain")

    kept = desired_of(git_repo, {"local": observation(running)})  # chat-8b runs: it stays
    assert [d.release for d in kept.deployments] == ["chat-8b"]
    assert [(e.release, e.fleet) for e in kept.errors] == [("big", "local")]
    assert kept.fleets["local"].room == {1: True}  # big took nothing


def test_a_pin_to_a_missing_commit_is_an_error_for_that_stage_only(git_repo: GitRepo) -> None:
    git_repo.pin("chat-8b", "prod", "f" * 40)
    git_repo.commit("pin to nowhere")
    desired = desired_of(git_repo)
    assert [d.stage for d in desired.deployments] == ["canary"]
    (error,) = desired.errors
    assert (error.stage, error.fleet, error.revision) == ("prod", None, "f" * 40)
    assert "no commit" in error.message


def test_nothing_new_goes_to_a_host_that_did_not_answer(git_repo: GitRepo) -> None:
    git_repo.write(
        "fleets/local.yaml",
        "fleet:\n  name: local\n  provider: local\n  hardware: h200\n  simulated: true\n"
        "  transport: local\n  hosts:\n    - { name: a, gpus: 4 }\n    - { name: b, gpus: 4 }\n",
    )
    git_repo.commit("two hosts")
    seen = observation([], hosts={"b": 4}, errors={"a": "a: connection refused"})
    desired = desired_of(git_repo, {"local": seen})
    assert {u.host for u in only(desired).units} == {"b"}
    assert desired.fleets["local"].unreachable == {"a": "a: connection refused"}
    assert desired.fleets["local"].gpus == 4


def test_only_fleets_that_running_stages_use_are_observed(git_repo: GitRepo) -> None:
    source = git_repo.source()
    head = source.resolve()
    stages = source.stages(head)
    assert fleets_of(stages, source.repo_at) == {"local"}  # not the example SSH fleets


def test_units_run_with_the_interpreter_given_for_their_fleet(git_repo: GitRepo) -> None:
    from reconciler.reconcile.desired import desired_units

    source = git_repo.source()
    head = source.resolve()
    stages = source.stages(head)

    class Here:  # the fleet's own rules, with this interpreter
        def __init__(self, fleet: Fleet) -> None:
            self.kind = rules_of(fleet)
            self.python = sys.executable

        def address(self, host: Host) -> str:
            return self.kind.address(host)

        def default_home(self) -> str:
            return self.kind.default_home()

    desired = desired_units(stages, source.repo_at, {}, rules=Here)
    assert all(u.unit.argv[0] == sys.executable for d in desired.deployments for u in d.units)


def test_a_topology_without_parallel_runs_tensor_parallel_over_its_gpus(
    git_repo: GitRepo,
) -> None:
    """The guide's `topology: { mode: aggregated, replicas: 2, gpus: 4 }`: it validates, is
    placed as two 4-GPU replicas, and the engine runs tp 4."""
    release = "releases/chat-8b/denv.yaml"
    git_repo.replace(
        release, "replicas: 2, gpus: 1, parallel: { tp: 1 } }", "replicas: 2, gpus: 4 }"
    )
    git_repo.replace(
        release, "fleets: [local]\n    bake: 10m", "fleets: [h200-use1]\n    bake: 10m"
    )
    git_repo.commit("two 4-GPU replicas on the H200 fleet")
    assert open_repo(git_repo.path).errors == []
    canary = only(desired_of(git_repo))
    assert [(u.id, u.unit.gpu_indices, u.replica_gpus) for u in canary.units] == [
        ("chat-8b.canary.h200-use1.aggregated-0", [0, 1, 2, 3], 4),
        ("chat-8b.canary.h200-use1.aggregated-1", [4, 5, 6, 7], 4),
        ("chat-8b.canary.h200-use1.router", [], 0),
    ]
    for engine in canary.units[:2]:
        argv = engine.unit.argv
        assert argv[argv.index("--tensor-parallel-size") + 1] == "4"


def test_an_invalid_release_is_held_as_it_runs_and_the_others_are_planned(
    git_repo: GitRepo,
) -> None:
    """On the default branch (spec/isolation.py): its units are neither planned nor stopped."""
    running = applied(desired_of(git_repo))
    add_release(git_repo, "other", replicas=1)
    git_repo.replace("releases/chat-8b/denv.yaml", "stages:", "stagez:")
    git_repo.commit("another release, and chat-8b broken")
    seen = {"local": observation(running)}
    desired = desired_of(git_repo, seen)
    assert [d.release for d in desired.deployments] == ["other"]
    (error,) = desired.errors
    assert (error.release, error.stage, error.fleet) == ("chat-8b", None, None)
    assert error.message.startswith("held, an invalid file: releases/chat-8b/denv.yaml:")
    actions = plan(desired, observed_units(seen)).actions
    assert {a.release for a in actions} == {"other"}  # chat-8b's units: no stop


def test_an_invalid_fleet_holds_the_deployments_on_it(git_repo: GitRepo) -> None:
    git_repo.replace("fleets/local.yaml", "trial_gpus: 8", "trial_gpus: many")
    git_repo.commit("break the fleet")
    desired = desired_of(git_repo)
    assert desired.deployments == ()
    assert {(e.release, e.fleet) for e in desired.errors} == {("chat-8b", "local")}
    assert all("fleets/local.yaml:" in e.message for e in desired.errors)
