"""Ports another program listens on, as the agent reports them and as placement avoids them:
a port held only on another loopback address (another local fleet on an address of its own)
does not keep a unit on this one off it; one on this address, a wildcard or a name does."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.model.observed import HostObservation
from reconciler.reconcile.desired import Desired
from tests.fleet.conftest import free_port
from tests.reconcile.conftest import GitRepo, desired_of, git_repo, observation

__all__ = ["git_repo"]  # the fixture, shared with the reconciler tests


@pytest.fixture
def listeners() -> Iterator[dict[str, int]]:
    """A socket listening on a loopback address of its own, another on every address."""
    own, wildcard = socket.socket(), socket.socket()
    try:
        own.bind(("127.77.1.1", 0))
        wildcard.bind(("0.0.0.0", free_port()))
        own.listen()
        wildcard.listen()
        yield {"own": own.getsockname()[1], "wildcard": wildcard.getsockname()[1]}
    finally:
        own.close()
        wildcard.close()


def test_the_agent_reports_ports_held_only_on_a_loopback_address_by_address(
    agent: AgentClient, listeners: dict[str, int]
) -> None:
    seen = agent.probe()
    assert {listeners["own"], listeners["wildcard"]} <= set(seen.listening)
    assert listeners["own"] in seen.loopback_listening["127.77.1.1"]
    held = {p for ports in seen.loopback_listening.values() for p in ports}
    assert listeners["wildcard"] not in held


SEEN = HostObservation(
    host="h",
    source="simulated",
    listening=(8000, 8040, 8096, 9000),
    loopback_listening={"127.5.5.1": (8040, 9000), "127.6.6.1": (8096, 9000)},
)


@pytest.mark.parametrize(
    ("address", "taken"),
    [
        ("127.5.5.1", (8000, 8040, 9000)),  # its own, and 9000 (also on its address)
        ("127.7.7.1", (8000,)),  # another loopback address: only the wildcard one
        ("10.0.0.5", (8000, 8040, 8096, 9000)),  # not loopback: every listener
        ("gpu-1.example", (8000, 8040, 8096, 9000)),  # a name: every listener
    ],
)
def test_the_ports_a_unit_bound_to_an_address_cannot_take(
    address: str, taken: tuple[int, ...]
) -> None:
    assert SEEN.taken_ports(address) == taken


def local_fleet(repo: GitRepo, address: str) -> None:
    repo.replace("fleets/local.yaml", "{ name: localhost, gpus: 16 }",
                 f"{{ name: localhost, address: {address}, gpus: 16 }}")  # fmt: skip
    repo.commit(f"the local fleet at {address}")


def first_ports(desired: Desired) -> list[int]:
    assert not desired.errors, desired.errors
    return sorted(u.unit.port or 0 for d in desired.deployments for u in d.units)


@pytest.mark.parametrize(
    ("held_on", "moved"), [("127.88.1.1", False), ("127.77.1.1", True)], ids=["other", "own"]
)
def test_placement_skips_a_port_only_when_it_is_held_on_the_fleets_address(
    git_repo: GitRepo, held_on: str, moved: bool
) -> None:
    local_fleet(git_repo, "127.77.1.1")
    seen = observation([], listening={"localhost": {8040}})
    seen.hosts["localhost"] = seen.hosts["localhost"].model_copy(
        update={"loopback_listening": {held_on: (8040,)}}
    )
    ports = first_ports(desired_of(git_repo, {"local": seen}))
    assert ports == ([8064, 8096, 8128] if moved else [8000, 8032, 8064])
