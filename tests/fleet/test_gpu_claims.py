"""One engine per GPU on a machine, whatever the agent's home or UNIX user: a unit's
supervisor and its engine hold the GPU's claim (host/claims.py), and a launch on a GPU another
process holds is refused with its holder named. Real agents through the local transport; the
second user is `nobody`, switched to by setpriv."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from reconciler.fleet.hostagent import AgentClient, AgentFailed
from reconciler.fleet.transport import Completed, LocalTransport
from tests.fleet.conftest import free_port, wait_for
from tests.fleet.test_agent import http_unit


def home_agent(home: Path) -> AgentClient:
    return AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": str(home)}), sys.executable)


@pytest.fixture
def homes(tmp_path: Path) -> Iterator[tuple[AgentClient, AgentClient]]:
    first, second = home_agent(tmp_path / "first"), home_agent(tmp_path / "second")
    yield first, second
    for agent in (first, second):
        for unit in agent.units():
            agent.stop(unit.id, grace=1)


def test_a_second_home_is_refused_a_gpu_the_first_homes_engine_holds(
    homes: tuple[AgentClient, AgentClient], tmp_path: Path
) -> None:
    first, second = homes
    first.launch(http_unit("web", free_port()))
    with pytest.raises(AgentFailed) as refused:
        second.launch(http_unit("other", free_port()))
    said = str(refused.value)
    assert "GPU 0 of this machine runs another engine" in said
    assert f"home {tmp_path / 'first'}, unit web" in said
    assert said.startswith("localhost: unit other not started: ")
    assert second.units() == []  # no record, nothing running
    beside = dict(http_unit("beside", free_port()), gpus=[1])
    assert second.launch(beside).alive  # another GPU is free
    first.stop("web", grace=5)
    assert second.launch(http_unit("other", free_port())).alive  # let go with its engine


def test_the_claim_outlives_a_killed_supervisor_and_ends_with_the_engine(
    homes: tuple[AgentClient, AgentClient],
) -> None:
    first, second = homes
    unit = first.launch(http_unit("web", free_port()))
    assert unit.pid is not None
    supervisor_pid = int(
        Path(f"/proc/{unit.pid}/stat").read_text().rpartition(")")[2].split()[1]
    )  # the engine's parent
    os.kill(supervisor_pid, signal.SIGKILL)
    wait_for(lambda: not Path(f"/proc/{supervisor_pid}/cmdline").exists(), what="its end")
    with pytest.raises(AgentFailed, match="GPU 0 of this machine runs another engine"):
        second.launch(http_unit("other", free_port()))  # the engine still holds it
    os.kill(unit.pid, signal.SIGKILL)
    wait_for(lambda: not Path(f"/proc/{unit.pid}/cmdline").exists(), what="the engine's end")
    assert second.launch(http_unit("other", free_port())).alive


def test_two_simulated_fleets_on_one_machine_each_have_their_own_gpus(
    homes: tuple[AgentClient, AgentClient],
) -> None:
    """A simulated fleet's GPU indices count its own GPUs, not the machine's: two simulated
    fleets' engines on GPU 0 both start; two in one fleet's scope do not."""
    first, _ = homes
    lab = dict(http_unit("lab-0", free_port()), gpu_scope="lab.localhost")
    assert first.launch(lab).alive
    assert first.launch(dict(http_unit("spare-0", free_port()), gpu_scope="spare.localhost")).alive
    assert first.launch(http_unit("machine-0", free_port())).alive  # the machine's own GPU 0
    with pytest.raises(AgentFailed, match=r"GPU 0 of lab.localhost \(simulated\) runs another"):
        first.launch(dict(lab, id="lab-1", port=free_port()))
    with pytest.raises(AgentFailed, match="bad GPU scope"):
        first.launch(dict(lab, id="lab-2", gpu_scope="../x"))


class AsUser(LocalTransport):
    """The local transport as another UNIX user: its agent, supervisors and engines are that
    user's processes."""

    def __init__(self, user: str, env: dict[str, str]) -> None:
        super().__init__(env=env)
        self.user = user

    def run(
        self, argv: Sequence[str], stdin: bytes | None = None, timeout: float = 60.0
    ) -> Completed:
        gid = pwd.getpwnam(self.user).pw_gid
        switch = ["setpriv", f"--reuid={self.user}", f"--regid={gid}", "--clear-groups"]
        return super().run([*switch, *argv], stdin=stdin, timeout=timeout)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_another_users_agent_is_refused_the_gpus_and_so_is_ours_its(tmp_path: Path) -> None:
    if shutil.which("setpriv") is None:
        pytest.fail("setpriv (util-linux) is missing")
    shared = Path(tempfile.mkdtemp(prefix="denv-users-"))  # /tmp: both users reach it
    try:
        shared.chmod(0o1777)  # as /tmp: either user makes the claims' folder
        claims = shared / "gpus"  # made by the first claim, sticky and open to every user
        theirs = shared / "nobody"
        theirs.mkdir()
        shutil.chown(theirs, "nobody", pwd.getpwnam("nobody").pw_gid)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(theirs), "DENV_GPU_CLAIMS": str(claims)}
        # the agent is stdlib only: the system's Python runs it as any user
        other = AgentClient(AsUser("nobody", {**env, "DENV_HOME": str(theirs / "denv")}),
                            "/usr/bin/python3")  # fmt: skip
        ours = AgentClient(
            LocalTransport(env={**os.environ, "DENV_HOME": str(tmp_path / "home"),
                                "DENV_GPU_CLAIMS": str(claims)}),
            sys.executable,
        )  # fmt: skip
        try:
            port = free_port()
            theirs_unit = dict(
                http_unit("theirs", port),
                argv=["/usr/bin/python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
            )
            started = other.launch(theirs_unit)
            assert started.alive
            assert Path(f"/proc/{started.pid}").stat().st_uid != 0  # nobody's process
            with pytest.raises(AgentFailed) as refused:
                ours.launch(http_unit("ours", free_port()))
            assert "GPU 0 of this machine runs another engine (user nobody" in str(refused.value)
            assert ours.units() == []
            assert ours.launch(dict(http_unit("ours", free_port()), gpus=[1])).alive
            with pytest.raises(AgentFailed, match="GPU 1 of this machine runs another engine"):
                other.launch(dict(theirs_unit, id="theirs-1", gpus=[1]))
            other.stop("theirs", grace=5)
            assert ours.launch(http_unit("ours-0", free_port())).alive
        finally:
            for agent in (ours, other):
                for unit in agent.units():
                    agent.stop(unit.id, grace=1)
    finally:
        subprocess.run(["rm", "-rf", str(shared)], check=False)
