"""The resident agent over real sshd: one agent per host on the kept channel, restarted when
killed, replaced when it is not this denv's, no duplicate unit when a channel is cut during a
launch, a hung host (sshd stopped) costing its deadline while the others go on, and a call
the bot gave up on never started by an agent that runs again."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import signal
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.fleet import hostagent
from reconciler.fleet.drivers.ssh import SshDriver
from reconciler.fleet.model.observed import Cause
from reconciler.fleet.threads import run_all
from reconciler.fleet.transport import HostUnreachable
from reconciler.spec.fleet import Fleet, Host
from tests.fleet.conftest import wait_for
from tests.labs.sshd import SshLab, SshServer, _descendants, ssh_settings

MARK = "denv-resident-test-unit"


def fleet_of(lab: SshLab, servers: list[SshServer], call_timeout: float = 30.0) -> Fleet:
    settings = ssh_settings(lab).model_copy(update={"call_timeout": call_timeout})
    return Fleet(
        name="lab",
        provider="local",
        hardware="h200",
        simulated=True,
        transport="ssh",
        ssh=settings,
        python=sys.executable,
        hosts=[Host(name=s.name, address=s.address, port=s.port, gpus=2) for s in servers],
    )


@pytest.fixture
def driver_for(lab_servers: tuple[SshLab, list[SshServer]]) -> Iterator[Any]:
    made: list[SshDriver] = []

    def make(call_timeout: float = 30.0) -> SshDriver:
        lab, servers = lab_servers
        driver = SshDriver(fleet_of(lab, servers, call_timeout))
        made.append(driver)
        return driver

    yield make
    for driver in made:
        for host in driver.fleet.hosts:
            with contextlib.suppress(Exception):
                for unit in driver.units(host.name):
                    driver.stop(host.name, unit.id, grace=1)
        driver.close()


@pytest.fixture
def lab_servers(ssh_lab: SshLab) -> tuple[SshLab, list[SshServer]]:
    return ssh_lab, [ssh_lab.start(name) for name in ("a", "b", "c")]


def agent_pid(driver: SshDriver, host: str) -> int | None:
    """The pid of the host's resident agent, None while there is none."""
    session = driver.agent(host)._session
    if session is None or session.dead:
        return None
    return int(session.hello(1)["hello"]["pid"])


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def sleeper(unit_id: str) -> dict[str, Any]:
    return {
        "id": unit_id,
        "digest": "d1",
        "env": {},
        "argv": [sys.executable, "-c", "import time; time.sleep(600)", MARK, unit_id],
    }


def processes_of(unit_id: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if MARK.encode() in argv and unit_id.encode() in argv:
                    found.append(int(entry.name))
    return found


def test_calls_go_to_one_resident_agent_per_host(driver_for: Any) -> None:
    driver = driver_for()
    assert not driver.observe(None).errors
    first = {host.name: agent_pid(driver, host.name) for host in driver.fleet.hosts}
    assert not driver.observe(None).errors
    driver.units("a")
    assert {host.name: agent_pid(driver, host.name) for host in driver.fleet.hosts} == first
    assert None not in first.values() and len(set(first.values())) == 3
    assert not any(gone(pid) for pid in first.values() if pid)


def test_an_agent_killed_on_its_host_is_restarted_on_the_next_call(driver_for: Any) -> None:
    driver = driver_for()
    driver.units("a")
    killed = agent_pid(driver, "a")
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    wait_for(lambda: gone(killed), what="the agent to die", timeout=60)
    assert driver.units("a") == []  # answered by a new agent
    assert agent_pid(driver, "a") != killed


def test_a_channel_cut_mid_launch_leaves_no_duplicate_unit(
    driver_for: Any, lab_servers: tuple[SshLab, list[SshServer]]
) -> None:
    """The launch is held inside the agent (the test holds the unit's lock), the connection
    is cut, and the bot's call goes again on a new channel: one unit runs, once."""
    driver = driver_for()
    driver.units("a")
    first_agent = agent_pid(driver, "a")
    assert first_agent is not None
    units = lab_servers[1][0].folder / "denv-home" / "units"
    units.mkdir(parents=True, exist_ok=True)
    answers: list[Any] = []
    with open(units / ".lock-held", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        call = threading.Thread(target=lambda: answers.append(driver.launch("a", sleeper("held"))))
        call.start()

        def waits_on_the_lock() -> bool:
            with contextlib.suppress(OSError):
                for fd in Path(f"/proc/{first_agent}/fd").iterdir():
                    if os.readlink(fd).endswith("/.lock-held"):
                        return True
            return False

        wait_for(waits_on_the_lock, what="the launch to reach the unit's lock", timeout=60)
        driver.agent("a").transport.close()  # the channel is cut mid-launch
        wait_for(
            lambda: agent_pid(driver, "a") not in (None, first_agent),
            what="a new agent",
            timeout=60,
        )
    call.join(60)
    assert not call.is_alive()
    (record,) = answers
    assert processes_of("held") == [record.pid]
    assert [(u.id, u.pid) for u in driver.units("a")] == [("held", record.pid)]


def stop_host(server: SshServer, sig: signal.Signals) -> None:
    """sshd and everything it runs (sessions, the agent): the host hangs, or resumes."""
    assert server.pid is not None
    for pid in [server.pid, *_descendants(server.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def test_a_hung_host_costs_its_deadline_while_the_others_converge(
    driver_for: Any, lab_servers: tuple[SshLab, list[SshServer]]
) -> None:
    driver = driver_for(call_timeout=2)
    assert not driver.observe(None).errors
    hung = lab_servers[1][1]  # b
    stop_host(hung, signal.SIGSTOP)
    try:
        seen = driver.observe(None)
        assert sorted(seen.hosts) == ["a", "c"]
        assert seen.causes["b"] == Cause.TIMED_OUT
        assert "b: no answer to probe in 2s" in seen.errors["b"]

        def launch(host: str) -> object:
            try:
                return driver.launch(host, sleeper(f"on-{host}"))
            except HostUnreachable as exc:
                return exc

        outcomes = dict(zip("abc", run_all(launch, "abc", 3), strict=True))
        assert isinstance(outcomes["b"], HostUnreachable)
        for host in "ac":
            assert [u.id for u in driver.units(host) if u.alive] == [f"on-{host}"]
    finally:
        stop_host(hung, signal.SIGCONT)

    def answers() -> bool:  # back: dialled again, a new agent (its start may take a while)
        try:
            return driver.units("b") == []
        except HostUnreachable:
            return False

    wait_for(answers, timeout=60, what="host b to answer again")


def older_agent() -> tuple[bytes, str]:
    """This agent's files with one changed: what an older denv shipped."""
    source, _ = hostagent.agent_source()
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(source)) as current, zipfile.ZipFile(buffer, "w") as old:
        for info in current.infolist():
            data = current.read(info)
            if info.filename == "common.py":
                data += b"\n# an older denv\n"
            old.writestr(info, data)
    data = buffer.getvalue()
    return data, hashlib.sha256(data).hexdigest()[:16]


def test_an_agent_of_an_older_denv_is_replaced(
    driver_for: Any, lab_servers: tuple[SshLab, list[SshServer]], monkeypatch: pytest.MonkeyPatch
) -> None:
    old = older_agent()
    monkeypatch.setattr(hostagent, "agent_source", lambda: old)
    driver = driver_for()
    driver.units("a")  # an older denv's agent runs on the kept channel
    older = agent_pid(driver, "a")
    assert older is not None
    monkeypatch.undo()  # this denv now
    assert driver.units("a") == []
    newer = agent_pid(driver, "a")
    assert newer != older
    wait_for(lambda: gone(older), what="the older agent to exit", timeout=60)

    # the file at this denv's name holds an older agent (a damaged cache): replaced too
    source, digest = hostagent.agent_source()
    cached = lab_servers[1][1].folder / "denv-home" / "agent" / f"{digest}.pyz"
    driver.units("b")
    driver.close()
    cached.write_bytes(old[0])
    again = driver_for()
    assert again.units("b") == []
    assert cached.read_bytes() == source
    assert again.agent("b")._session is not None
    assert again.agent("b")._session.hello(1)["hello"]["digest"] == digest


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def test_a_call_the_bot_gave_up_on_is_never_started_over_ssh(driver_for: Any) -> None:
    """The agent is stopped with a launch in its stdin; the call times out and the bot drops
    the connection, which sshd closes. Running again, the agent starts nothing of it."""
    driver = driver_for(call_timeout=2)
    driver.units("a")
    pid = agent_pid(driver, "a")
    assert pid is not None
    session = parent_of(pid)  # sshd's process for the agent's connection
    os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(HostUnreachable, match="no answer to launch in 2s"):
            driver.launch("a", sleeper("late-ssh"))
        wait_for(lambda: gone(session), what="sshd to end the dropped connection")
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: gone(pid), what="the stopped agent to end")
    assert driver.units("a") == [] and processes_of("late-ssh") == []
