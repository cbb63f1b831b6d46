"""A resident agent forks each unit's supervisor (no Python start per unit), and what it forks
holds nothing of the agent's channel: the channel closes when the agent ends, the units run
on, and no process of the agent's is left but their supervisors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from reconciler.fleet.hostagent import agent_source
from tests.fleet.conftest import answers, free_port, wait_for
from tests.fleet.test_agent import http_unit


def cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def agent_processes(zip_path: Path) -> set[int]:
    """Every process whose command line names this agent file."""
    mine = str(zip_path).encode()
    return {
        int(name)
        for name in os.listdir("/proc")
        if name.isdigit() and mine in (cmdline(int(name)) or b"").split(b"\0")
    }


class Resident:
    """`python agent.pyz serve` on pipes, as the bot keeps it on an SSH channel."""

    def __init__(self, zip_path: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(zip_path), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin: IO[bytes] = self.process.stdin
        self.stdout: IO[bytes] = self.process.stdout
        self.hello = json.loads(self.stdout.readline())["hello"]

    def call(self, verb: str, payload: Any = None, args: tuple[str, ...] = ()) -> Any:
        request = {"id": 1, "verb": verb, "args": list(args), "payload": payload}
        self.stdin.write((json.dumps(request) + "\n").encode())
        self.stdin.flush()
        answer = json.loads(self.stdout.readline())
        assert answer["ok"], answer
        return answer["result"]


@pytest.fixture
def agent_zip(tmp_path: Path) -> Path:
    path = tmp_path / "agent.pyz"
    path.write_bytes(agent_source()[0])
    return path


@pytest.fixture
def resident(agent_zip: Path, denv_home: Path) -> Iterator[Resident]:
    env = {**os.environ, "DENV_HOME": str(denv_home)}
    agent = Resident(agent_zip, env)
    yield agent
    if agent.process.poll() is None:
        agent.stdin.close()
        agent.process.wait(timeout=30)
    for record in (denv_home / "units").glob("*.json"):  # never leave a unit behind
        subprocess.run(
            [sys.executable, str(agent_zip), "stop", record.stem, "--grace", "1"],
            env=env,
            capture_output=True,
            timeout=60,
        )


def test_a_resident_agents_supervisors_are_forked_not_started(
    resident: Resident, agent_zip: Path
) -> None:
    port = free_port()
    record = resident.call("launch", http_unit("web", port))
    wait_for(lambda: answers(port), what="the unit to serve")
    supervisor = record["supervisor_pid"]
    # the agent's own code, already loaded: its command line is the resident agent's
    assert cmdline(supervisor) == cmdline(resident.process.pid)
    # a session of its own: the channel's end (SIGHUP to the agent's session) is not its end
    assert os.getsid(supervisor) != os.getsid(resident.process.pid)


def test_the_channel_closes_when_the_agent_ends_and_only_supervisors_are_left(
    resident: Resident, agent_zip: Path, denv_home: Path
) -> None:
    ports = [free_port(), free_port()]
    records = [  # each on a GPU of its own
        resident.call("launch", dict(http_unit(f"web-{p}", p), gpus=[gpu]))
        for gpu, p in enumerate(ports)
    ]
    supervisors = {r["supervisor_pid"] for r in records}
    wait_for(lambda: all(answers(p) for p in ports), what="the units to serve")
    ended = threading.Event()

    def drain() -> None:  # EOF only once no process holds the channel's write end
        resident.stdout.read()
        ended.set()

    threading.Thread(target=drain, daemon=True).start()
    resident.stdin.close()
    wait_for(ended.is_set, timeout=30, what="the channel to close after the agent ended")
    wait_for(
        lambda: agent_processes(agent_zip) == supervisors,
        timeout=30,
        what="the agent and its spawner to end, the supervisors to stay",
    )
    assert all(answers(p) for p in ports)
