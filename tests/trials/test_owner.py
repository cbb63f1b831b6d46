"""Trial owners: the label, judging it against this machine's processes, and the trials the
agents report grouped with their owners' state."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from reconciler.fleet.model.observed import FleetObservation, HostObservation, UnitRecord
from reconciler.trials.owner import (
    Owner,
    OwnerState,
    TrialState,
    found_trials,
    judge,
    owner_state,
    parse_owner,
    process_start,
    this_process,
)


@pytest.mark.parametrize(
    ("label", "owner"),
    [
        ("ci-7/4242/981234", Owner(host="ci-7", pid=4242, start=981234)),
        ("a/b.example/12/34", Owner(host="a/b.example", pid=12, start=34)),
        (None, None),
        ("", None),
        ("ci-7/4242", None),
        ("/4242/1", None),
        ("ci-7/x/1", None),
        ("ci-7/4242/-1", None),
        ("ci-7/0/1", None),
        ("ci-7/4242/\u00b2", None),
    ],
    ids=[
        "plain",
        "slash-in-host",
        "none",
        "empty",
        "no-start",
        "no-host",
        "bad-pid",
        "negative",
        "pid-0",
        "non-ascii-digit",
    ],
)
def test_parse_owner(label: str | None, owner: Owner | None) -> None:
    assert parse_owner(label) == owner
    if owner is not None:
        assert parse_owner(owner.label) == owner


@pytest.mark.parametrize(
    ("owner", "start_now", "state"),
    [
        (Owner(host="here", pid=7, start=100), 100, OwnerState.ALIVE),
        (Owner(host="here", pid=7, start=100), None, OwnerState.GONE),
        (Owner(host="here", pid=7, start=100), 555, OwnerState.GONE),  # pid reused
        (Owner(host="ci-7", pid=7, start=100), None, OwnerState.ELSEWHERE),
        (None, 100, OwnerState.UNKNOWN),
    ],
    ids=["alive", "no-such-pid", "pid-reused", "other-host", "no-label"],
)
def test_judge(owner: Owner | None, start_now: int | None, state: OwnerState) -> None:
    assert judge(owner, "here", start_now) == state


def test_this_process_is_alive() -> None:
    label = this_process()
    owner = parse_owner(label)
    assert owner is not None
    assert (owner.host, owner.pid) == (socket.gethostname(), os.getpid())
    assert owner_state(label) == OwnerState.ALIVE


def test_a_finished_child_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    start = process_start(child.pid)
    assert start is not None
    label = Owner(host=socket.gethostname(), pid=child.pid, start=start).label
    assert owner_state(label) == OwnerState.ALIVE
    child.kill()
    child.wait(timeout=30)
    assert owner_state(label) == OwnerState.GONE


def test_a_reused_pid_is_not_the_owner() -> None:
    start = process_start(os.getpid())
    assert start is not None
    label = Owner(host=socket.gethostname(), pid=os.getpid(), start=start + 1).label
    assert owner_state(label) == OwnerState.GONE


def test_an_owner_on_another_machine_is_not_judged() -> None:
    label = Owner(host=socket.gethostname() + "-ci", pid=os.getpid(), start=1).label
    assert owner_state(label) == OwnerState.ELSEWHERE
    assert owner_state("not a label") == OwnerState.UNKNOWN


def _record(
    uid: str, labels: dict[str, str], gpus: tuple[int, ...] = (), started: float = 1.0
) -> UnitRecord:
    return UnitRecord(id=uid, digest="d", gpus=gpus, alive=True, labels=labels, started_at=started)


def test_found_trials_groups_units_router_last_and_leaves_releases_out() -> None:
    def trial(name: str, role: str, owner: str) -> dict[str, str]:
        return {"trial": name, "purpose": "bench", "recipe": "r@1", "role": role, "owner": owner}

    observation = FleetObservation(
        "lab",
        hosts={
            "h1": HostObservation(
                host="h1",
                source="simulated",
                units=(
                    _record("trial-b.router", trial("b", "router", "x/1/1"), started=5.0),
                    _record("trial-b.aggregated-0", trial("b", "aggregated", "x/1/1"), (2,), 4.0),
                    _record("trial-a.aggregated-0", trial("a", "aggregated", "y/2/2"), (3,), 2.0),
                    # a release's unit, even one carrying a trial label, is never a trial's
                    _record("chat.canary.lab.router", {"trial": "b", "release": "chat"}),
                ),
            )
        },
    )
    states = {"x/1/1": OwnerState.GONE, "y/2/2": OwnerState.ELSEWHERE}
    found = found_trials(observation, lambda label: states[label or ""])
    assert [(t.trial, t.state, t.started_at) for t in found] == [
        ("a", TrialState.ELSEWHERE, 2.0),
        ("b", TrialState.ABANDONED, 4.0),
    ]
    abandoned = found[1]
    assert [u.id for u in abandoned.units] == ["trial-b.aggregated-0", "trial-b.router"]
    assert (abandoned.owner, abandoned.purpose, abandoned.recipe) == ("x/1/1", "bench", "r@1")
    assert abandoned.gpus == {"h1": [2]}
