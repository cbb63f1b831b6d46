"""Fixtures for the fleet tests: an agent on this machine through the local transport."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from tests.labs.sshd import ssh_lab

__all__ = ["ssh_lab"]  # the fixture (tests/labs/sshd.py), for the fleet tests


def wait_for(condition: Callable[[], object], timeout: float = 10.0, what: str = "") -> object:
    """Poll a condition until it holds; fail the test with `what` when it never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def answers(port: int) -> bool:
    return answers_at("127.0.0.1", port)


def answers_at(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.2):
            return True
    except OSError:
        return False


class SilentListener:
    """A TCP listener on loopback that accepts every connection and never sends a byte: an SSH
    host whose banner never comes. `accepted` counts the connections it took."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.port: int = self.socket.getsockname()[1]
        self.connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def accepted(self) -> int:
        return len(self.connections)

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return  # closed
            self.connections.append(connection)

    def close(self) -> None:
        self.socket.shutdown(socket.SHUT_RDWR)  # wakes the accept() above
        self.socket.close()
        self._thread.join()
        for connection in self.connections:
            connection.close()


@pytest.fixture
def silent() -> Iterator[SilentListener]:
    listener = SilentListener()
    try:
        yield listener
    finally:
        listener.close()


@pytest.fixture
def denv_home(tmp_path: Path) -> Path:
    return tmp_path / "denv-home"


@pytest.fixture
def agent(denv_home: Path) -> Iterator[AgentClient]:
    env = {**os.environ, "DENV_HOME": str(denv_home)}
    client = AgentClient(LocalTransport(env=env))
    yield client
    for unit in client.units():  # never leave a process behind, also when a test failed
        client.stop(unit.id, grace=1)
