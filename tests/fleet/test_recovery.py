"""`repair` on the host agent: an unreadable unit record's processes are found by their
DENV_UNIT marker in this agent home only, stopped, and the record moved aside."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from tests.fleet.conftest import free_port, wait_for
from tests.fleet.test_agent import http_unit


@pytest.fixture
def homes(tmp_path: Path) -> Iterator[list[AgentClient]]:
    """Two agent homes on this machine (two bots' local fleets)."""
    found = [
        AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": str(tmp_path / name)}))
        for name in ("a", "b")
    ]
    yield found
    for client in found:
        client.repair(grace=1)
        for unit in client.units():
            client.stop(unit.id, grace=1)


def runs(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_repair_stops_the_units_processes_of_its_own_home_only(
    homes: list[AgentClient], tmp_path: Path
) -> None:
    mine, other = homes
    ours, theirs = (  # one engine per GPU on a machine, whatever the home
        client.launch(dict(http_unit("web", free_port()), gpus=[gpu]))
        for gpu, client in enumerate(homes)
    )
    assert ours.pid and theirs.pid
    record = tmp_path / "a" / "units" / "web.json"
    record.write_bytes(record.read_bytes()[:30])

    [repaired] = mine.repair(grace=5).repaired

    assert (repaired.record, repaired.id, repaired.path) == ("unit", "web", str(record))
    assert ours.pid in repaired.stopped and theirs.pid not in repaired.stopped
    wait_for(lambda: not runs(ours.pid or 0), what="the unit to end")
    assert runs(theirs.pid)  # the same unit id in another home: not this agent's
    assert not record.exists() and Path(repaired.moved_to).exists()
    assert mine.units() == [] and [u.id for u in other.units()] == ["web"]
    assert mine.repair().repaired == ()  # nothing left to repair
