"""A host whose agent hangs (SIGSTOP) in the middle of a roll is left alone like an unreachable
one: its first call that gets no answer in the fleet's `call_timeout` ends the pass's work
there (no other call waits on it), the other fleet rolls on, and once the agent runs again the
next pass converges the host with no engine left over."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import HostUnreachable, LocalTransport
from tests.e2e.test_reconcile import Lab, converged, fleet_file, lab
from tests.fleet.conftest import wait_for
from tests.fleet.test_resident import gone, processes_of, sleeper
from tests.labs.sshd import resident_agents, ssh_lab

__all__ = ["lab", "ssh_lab"]  # the fixtures

CALL_TIMEOUT = 3


def agents(lab: Lab, fleet: str) -> list[int]:
    return resident_agents(lab.servers[fleet])


@contextlib.contextmanager
def stopped(pids: list[int]) -> Iterator[None]:
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def engines(lab: Lab, fleet: str) -> set[tuple[str, int | None, str]]:
    """The fleet's host's live engines: (id, pid, digest)."""
    units = lab.units(fleet)
    return {(u.id, u.pid, u.digest) for u in units if u.alive and not u.id.endswith("router")}


def test_a_hung_agent_isolates_its_host_and_leaves_nothing_behind(lab: Lab, tmp_path: Path) -> None:
    text = fleet_file("lab2", lab.servers["lab2"], lab.ssh)
    text = text.replace("connect_timeout: 2", f"connect_timeout: 2, call_timeout: {CALL_TIMEOUT}")
    lab.repo.write("fleets/lab2.yaml", text)
    lab.release(replicas=2, fleets="lab, lab2")
    lab.reconcile()
    before = {fleet: engines(lab, fleet) for fleet in ("lab", "lab2")}
    lab.release(replicas=2, batch=64, fleets="lab, lab2")
    marker = tmp_path / "paused"
    env = {**os.environ, "DENV_CACHE": str(lab.cache), "DENV_HOME": str(lab.cache / "home")}
    env["DENV_FAULT_PAUSE_AT"] = f"after-prepare:{marker}"
    argv = [sys.executable, "-m", "reconciler", "reconcile", "--once", *lab.timing]
    bot = subprocess.Popen(
        [*argv, "--repo", str(lab.repo.path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(marker.exists, timeout=120, what="the bot to reach apply")
    hung = agents(lab, "lab2")
    assert hung, "lab2's resident agent"
    with stopped(hung):
        marker.unlink()
        out, err = bot.communicate(timeout=240)
        left = engines(lab, "lab2")  # a one-shot agent of its own answers
    said = out + err
    assert bot.returncode == 1, said
    assert "lab2-h0: no answer to" in said, said
    assert "nothing more is asked of lab2-h0 in this pass" in said, said
    assert "left alone" not in said  # the calls not made are not errors of their own
    assert left == before["lab2"]  # nothing started or stopped there after the hang
    converged(lab, 2)  # the other fleet rolled on
    assert engines(lab, "lab").isdisjoint(before["lab"])
    # the agent, running again, finds its bot gone: it starts nothing it was sent and exits
    wait_for(lambda: set(agents(lab, "lab2")).isdisjoint(hung), what="the hung agent to end")
    assert engines(lab, "lab2") == left
    lab.reconcile()
    rolled = lab.units("lab2")
    live = [u for u in rolled if u.alive and not u.id.endswith("router")]
    gpus = [g for u in live for g in u.gpus]
    assert len(live) == len(set(gpus)) == 2 and len(gpus) == 2, live
    assert engines(lab, "lab2").isdisjoint(before["lab2"])  # every replica replaced
    [row] = [d for d in lab.status()["deployments"] if d["fleet"] == "lab2"]
    assert (row["ready"], row["replicas"], row["drift"]) == (2, 2, ""), row


def test_a_call_the_bot_gave_up_on_is_never_started(tmp_path: Path) -> None:
    """The launch waits in the stopped agent's stdin past its deadline; the bot gives up and
    closes the session. Running again, the agent finds its bot gone and starts nothing."""
    env = {**os.environ, "DENV_HOME": str(tmp_path / "home")}
    agent = AgentClient(LocalTransport(env=env), python=sys.executable, resident=True, deadline=2)
    late = f"late-{uuid.uuid4().hex[:8]}"
    assert agent.units() == []  # the resident agent is up
    session = agent._session
    assert session is not None
    pid = int(session.hello(1)["hello"]["pid"])
    os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(HostUnreachable, match="no answer to launch in 2s"):
            agent.launch(sleeper(late))
    finally:
        os.kill(pid, signal.SIGCONT)
    try:
        wait_for(lambda: gone(pid), what="the stopped agent to end")
        assert agent.units() == [] and processes_of(late) == []  # asked of a new agent
    finally:
        agent.close()
        for started in processes_of(late):  # a failed run's unit
            os.kill(started, signal.SIGKILL)
