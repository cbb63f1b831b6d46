"""The host agent through the local transport: probe, launch, units, stop, logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.fleet.hostagent import AgentClient, AgentFailed
from reconciler.fleet.transport import LocalTransport
from tests.fleet.conftest import answers, free_port, wait_for


def http_unit(unit_id: str, port: int, digest: str = "d1") -> dict[str, object]:
    return {
        "id": unit_id,
        "digest": digest,
        "port": port,
        "gpus": [0],
        "argv": [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        "env": {"DENV_TEST": "1"},
    }


def test_probe_reports_simulated_gpus_and_units(agent: AgentClient) -> None:
    port = free_port()
    agent.launch(http_unit("web", port))
    seen = agent.probe(
        {"count": 4, "name": "NVIDIA H200 (simulated)", "memory_gb": 141, "host": "sim-a"}
    )
    assert seen.source == "simulated"
    assert [g.index for g in seen.gpus] == [0, 1, 2, 3]
    assert seen.gpus[0].memory_total_mib == 141 * 1024
    assert [p.pid for p in seen.gpus[0].processes] == [seen.units[0].pid]
    assert seen.gpus[1].processes == ()
    assert [u.id for u in seen.units] == ["web"] and seen.units[0].alive
    wait_for(lambda: port in agent.probe().listening, what="the unit's port listed as listening")


def test_probe_without_gpus_says_what_it_tried(agent: AgentClient) -> None:
    seen = agent.probe()
    if seen.source == "none":  # this machine has no GPU: every source was tried in order
        assert seen.gpus == ()
        assert [t.split(":")[0] for t in seen.tried] == ["nvml", "amdsmi", "nvidia_smi", "amd_smi"]


def test_launch_outlives_the_call_and_is_idempotent(agent: AgentClient) -> None:
    port = free_port()
    first = agent.launch(http_unit("web", port))
    assert first.alive and first.restarts == 0
    wait_for(lambda: answers(port), what="the unit's port")
    again = agent.launch(http_unit("web", port))
    assert again.pid == first.pid  # same digest: nothing started
    with pytest.raises(AgentFailed, match="runs another spec"):
        agent.launch(http_unit("web", port, digest="d2"))
    stopped = agent.stop("web", grace=5)
    assert stopped["stopped"] is True
    assert not answers(port)
    assert agent.units() == []
    assert agent.stop("web")["stopped"] is False  # already gone: nothing to do


def cores_allowed(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(
        line.split()[1] for line in status.splitlines() if line.startswith("Cpus_allowed_list")
    )


def test_a_unit_given_cores_runs_on_them_only_and_so_does_what_it_starts(
    agent: AgentClient,
) -> None:
    """vLLM's CPU build: the frontend it starts shares its replica's core, never another's."""
    core = min(os.sched_getaffinity(0))
    sleeper = "[sys.executable, '-c', 'import time; time.sleep(60)']"
    started = f"import subprocess, sys, time; subprocess.Popen({sleeper}); time.sleep(60)"
    unit = agent.launch(
        {"id": "cpu", "digest": "k", "cpus": [core], "argv": [sys.executable, "-c", started]}
    )
    assert unit.pid is not None
    child = wait_for(
        lambda: next(
            iter(Path(f"/proc/{unit.pid}/task/{unit.pid}/children").read_text().split()), None
        ),
        what="the unit's child process",
    )
    assert cores_allowed(unit.pid) == cores_allowed(int(child)) == str(core)
    agent.stop("cpu", grace=1)


def test_cores_the_host_lacks_are_refused_before_anything_starts(agent: AgentClient) -> None:
    beyond = max(os.sched_getaffinity(0)) + 1
    with pytest.raises(AgentFailed, match=rf"unit cpu is given cores \[{beyond}\] that this host"):
        agent.launch({"id": "cpu", "digest": "k", "cpus": [beyond], "argv": [sys.executable, "-V"]})
    assert agent.units() == []


def test_a_unit_that_died_is_reported_with_its_exit_code(agent: AgentClient) -> None:
    unit = {
        "id": "crash",
        "digest": "c",
        "argv": [sys.executable, "-c", "print('boom'); raise SystemExit(3)"],
    }
    agent.launch(unit)
    dead = wait_for(
        lambda: next((u for u in agent.units() if u.exit_code is not None), None),
        what="the exit code",
    )
    assert dead.alive is False and dead.exit_code == 3  # type: ignore[union-attr]
    assert agent.logs("crash")["lines"] == ["boom"]
    relaunched = agent.launch(unit)
    assert relaunched.restarts == 1


def test_a_restart_unit_is_started_again_by_its_supervisor_at_once(agent: AgentClient) -> None:
    """No launch, no reconcile pass: its supervisor starts it again when it dies."""
    port = free_port()
    first = agent.launch({**http_unit("router", port), "restart": True})
    assert first.restart and first.restarts == 0
    wait_for(lambda: answers(port), what="the unit's port")
    os.kill(first.pid or 0, signal.SIGKILL)
    again = wait_for(
        lambda: next((u for u in agent.units() if u.pid not in (None, first.pid)), None),
        what="a new process",
    )
    assert again.restarts == 1 and again.exit_code is None  # type: ignore[union-attr]
    wait_for(lambda: answers(port), what="the unit's port again")
    assert agent.launch({**http_unit("router", port), "restart": True}).pid == again.pid  # type: ignore[union-attr]


def test_a_stopped_restart_unit_stays_stopped(agent: AgentClient) -> None:
    port = free_port()
    agent.launch({**http_unit("router", port), "restart": True})
    wait_for(lambda: answers(port), what="the unit's port")
    assert agent.stop("router", grace=5)["stopped"] is True
    assert agent.units() == [] and not answers(port)


def test_a_unit_without_restart_stays_dead_until_launched(agent: AgentClient) -> None:
    first = agent.launch(http_unit("web", free_port()))
    os.kill(first.pid or 0, signal.SIGKILL)
    dead = wait_for(
        lambda: next((u for u in agent.units() if u.exit_code is not None), None),
        what="the exit code",
    )
    assert dead.alive is False and dead.pid == first.pid  # type: ignore[union-attr]


def test_a_reused_pid_is_not_taken_for_alive(agent: AgentClient, denv_home: Path) -> None:
    units = denv_home / "units"
    units.mkdir(parents=True)
    # This test's own pid is alive, but it is not the process the record started.
    (units / "ghost.json").write_text(
        json.dumps({"id": "ghost", "digest": "g", "pid": os.getpid(), "start_time": 1})
    )
    ghost = next(u for u in agent.units() if u.id == "ghost")
    assert ghost.alive is False
    assert agent.stop("ghost")["stopped"] is False  # and it is never signalled
    assert os.getpid()  # still here


def test_logs_rotate_at_the_cap(denv_home: Path) -> None:
    from reconciler.fleet.transport import LocalTransport

    env = {**os.environ, "DENV_HOME": str(denv_home), "DENV_LOG_CAP": "2000"}
    agent = AgentClient(LocalTransport(env=env))
    agent.launch(
        {
            "id": "chatty",
            "digest": "x",
            "argv": [sys.executable, "-c", "for i in range(500): print(f'line {i:04d}')"],
        }
    )
    wait_for(lambda: agent.units()[0].exit_code is not None, what="the unit to finish")
    tail = agent.logs("chatty", tail=2)["lines"]
    assert tail == ["line 0498", "line 0499"]
    log = Path(agent.units()[0].log or "")
    assert log.stat().st_size <= 2000 and Path(f"{log}.1").stat().st_size <= 2000
    agent.stop("chatty")


def test_full_disk_for_the_log_is_reported_and_the_unit_runs_on(
    agent: AgentClient, denv_home: Path
) -> None:
    logs = denv_home / "logs"
    logs.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(logs)],
        capture_output=True,
        check=False,
    )
    assert mounted.returncode == 0, mounted.stderr  # root, as in CI
    try:
        port = free_port()
        agent.launch(
            {
                "id": "noisy",
                "digest": "n",
                "port": port,
                "argv": [
                    sys.executable,
                    "-c",
                    f"import http.server,sys; print('x' * 100000, flush=True); "
                    f"http.server.test(HandlerClass=http.server.SimpleHTTPRequestHandler, "
                    f"port={port}, bind='127.0.0.1')",
                ],
            }
        )
        wait_for(lambda: answers(port), what="the unit to serve despite the full disk")
        noisy = wait_for(
            lambda: next((u for u in agent.units() if u.log_error), None),
            what="the log error in the unit record",
        )
        assert noisy.alive  # type: ignore[union-attr]
        assert "No space left on device" in noisy.log_error  # type: ignore[union-attr]
        assert "No space left on device" in (agent.logs("noisy")["log_error"] or "")
        agent.stop("noisy", grace=2)
    finally:
        subprocess.run(["umount", str(logs)], check=False)


def test_bad_unit_id_is_refused(agent: AgentClient) -> None:
    with pytest.raises(AgentFailed, match="bad unit id"):
        agent.logs("../etc/passwd")


def test_one_message_per_host_per_observation_to_a_resident_agent(denv_home: Path) -> None:
    """After the first pass, observing is one message per host to the agent already running
    there: no command started, no agent started again."""
    from reconciler.fleet.drivers.local import LocalDriver
    from reconciler.fleet.drivers.registry import Drivers
    from reconciler.fleet.transport import Completed, LocalTransport, Transport
    from reconciler.spec.fleet import Fleet, Host

    commands: list[str] = []
    started: list[str] = []
    messages: list[str] = []

    class Counting(LocalTransport):
        def run(self, argv, stdin=None, timeout=60.0) -> Completed:  # type: ignore[no-untyped-def]
            commands.append(self.host)
            return super().run(argv, stdin, timeout)

        def open_stream(self, argv):  # type: ignore[no-untyped-def]
            started.append(self.host)
            stream = super().open_stream(argv)
            send, host = stream.send, self.host

            def counted(data: bytes) -> None:
                messages.append(host)
                send(data)

            stream.send = counted  # type: ignore[method-assign]
            return stream

    class CountingDriver(LocalDriver):
        def dial(self, host: Host) -> Transport:
            return Counting(host.name, env=self.env)

    env = {**os.environ, "DENV_HOME": str(denv_home)}
    drivers = Drivers(local_env=env, kinds={"local": CountingDriver})
    fleet = Fleet(
        name="f",
        provider="p",
        hardware="h200",
        transport="local",
        simulated=True,
        hosts=[Host(name=f"h{i}", gpus=8) for i in range(3)],
    )
    try:
        drivers.get(fleet).observe(None)  # the first pass installs and starts the agents
        assert set(started) == {"h0", "h1", "h2"}  # again where it was not installed yet
        commands.clear(), started.clear(), messages.clear()
        seen = drivers.get(fleet).observe(None)
        assert sorted(messages) == ["h0", "h1", "h2"]
        assert commands == [] and started == []
        assert sorted(seen.hosts) == ["h0", "h1", "h2"] and not seen.errors
    finally:
        drivers.close()

    one_shot = Drivers(local_env=env, kinds={"local": CountingDriver}, one_shot=True)
    try:  # `denv fleet probe` from a laptop: one command per host, no agent left running
        commands.clear(), started.clear()
        assert not one_shot.get(fleet).observe(None).errors
        assert sorted(commands) == ["h0", "h1", "h2"] and started == []
    finally:
        one_shot.close()


SECRETS = {
    "GITHUB_TOKEN": "ghs_not_for_engines",
    "HF_TOKEN": "hf_not_for_engines",
    "DENV_GITHUB_APP_KEY": "-----BEGIN RSA PRIVATE KEY-----",
    "AWS_SECRET_ACCESS_KEY": "not-for-engines",
}


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def test_a_unit_starts_with_its_own_environment_not_the_bots(denv_home: Path) -> None:
    """A local fleet's agent runs in the bot's environment (tokens, the App key): a unit gets
    the passed names (PATH, HOME, locale…) and its own variables, never those."""
    env = {**os.environ, **SECRETS, "DENV_HOME": str(denv_home), "LC_ALL": "C.UTF-8"}
    client = AgentClient(LocalTransport(env=env))
    port = free_port()
    try:
        unit = client.launch(http_unit("web", port))
        assert unit.pid is not None
        seen = environ_of(unit.pid)
    finally:
        client.stop("web", grace=1)
    assert seen["DENV_TEST"] == "1"  # the unit's own
    assert seen["PATH"] and seen["LC_ALL"] == "C.UTF-8"
    assert seen["DENV_HOME"] == str(denv_home)
    leaked = set(SECRETS) & set(seen)
    assert not leaked
    assert not [n for n in seen if any(w in n for w in ("TOKEN", "KEY", "SECRET", "PASSWORD"))]


@pytest.mark.parametrize("resident", [False, True], ids=["once", "resident"])
def test_a_fleet_agent_home_holds_the_agent_and_its_units(
    denv_home: Path, tmp_path: Path, resident: bool
) -> None:
    scratch = tmp_path / "scratch" / "denv"  # the fleet file's agent_home
    env = {**os.environ, "DENV_HOME": str(denv_home)}  # the user's own default, left alone
    client = AgentClient(LocalTransport(env=env), resident=resident, home=str(scratch))
    try:
        client.launch(http_unit("web", free_port()))
        assert [u.id for u in client.units()] == ["web"]
        assert list((scratch / "agent").glob("*.pyz")) and (scratch / "units").is_dir()
        assert not denv_home.exists()
    finally:
        for unit in client.units():
            client.stop(unit.id, grace=1)
        client.close()
