"""The ssh transport and the agent over real sshd: loopback and network namespaces."""

from __future__ import annotations

import sys
import time

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.ssh import SshTransport
from reconciler.fleet.transport import HostUnreachable
from reconciler.spec.fleet import Host
from tests.fleet.conftest import ssh_settings, wait_for
from tests.fleet.sshd import SshLab


def transport(lab: SshLab, name: str, address: str, port: int) -> SshTransport:
    return SshTransport(Host(name=name, address=address, gpus=8), ssh_settings(lab, port))


def test_commands_run_with_arguments_quoted(ssh_lab: SshLab) -> None:
    server = ssh_lab.start("a")
    ssh = transport(ssh_lab, "a", server.address, server.port)
    done = ssh.run(["printf", "%s|", "two words", "$HOME", "; rm -rf /"])
    assert done.exit_code == 0
    assert done.stdout == "two words|$HOME|; rm -rf /|"
    assert ssh.run(["cat"], stdin=b"through stdin").stdout == "through stdin"
    ssh.close()


def test_agent_over_ssh_launches_a_unit_that_outlives_the_session(ssh_lab: SshLab) -> None:
    server = ssh_lab.start("a")
    ssh = transport(ssh_lab, "a", server.address, server.port)
    agent = AgentClient(ssh, python=sys.executable)
    unit_home = ssh_lab.folder / "a-home"
    unit = {
        "id": "sleeper",
        "digest": "s1",
        "env": {},
        "argv": [sys.executable, "-c", "import time; time.sleep(600)"],
    }
    ssh.run(["mkdir", "-p", str(unit_home)])
    try:
        record = agent.launch(unit)
        ssh.close()  # the SSH session ends; the unit must not
        again = AgentClient(
            transport(ssh_lab, "a", server.address, server.port), python=sys.executable
        )
        units = again.units()
        assert [(u.id, u.alive, u.pid) for u in units] == [("sleeper", True, record.pid)]
        assert again.stop("sleeper", grace=2)["stopped"] is True
        assert again.units() == []
    finally:
        AgentClient(
            transport(ssh_lab, "a", server.address, server.port), python=sys.executable
        ).stop("sleeper", grace=1)


def test_unknown_host_key_is_refused(ssh_lab: SshLab) -> None:
    server = ssh_lab.start("a")
    ssh_lab.known_hosts.write_text("")  # nobody vouches for this host
    with pytest.raises(HostUnreachable, match="a "):
        transport(ssh_lab, "a", server.address, server.port).run(["true"])


def test_unreachable_host_is_a_clear_error_quickly(ssh_lab: SshLab) -> None:
    server = ssh_lab.start("a")
    server.kill()
    started = time.monotonic()
    with pytest.raises(HostUnreachable, match=r"a \(127.0.0.1:\d+\) is unreachable"):
        transport(ssh_lab, "a", server.address, server.port).run(["true"])
    assert time.monotonic() - started < 10


def test_hosts_in_network_namespaces(ssh_lab: SshLab) -> None:
    servers = [ssh_lab.start(name, namespaced=True) for name in ("n1", "n2")]
    assert [s.address for s in servers] != ["127.0.0.1", "127.0.0.1"]
    for server in servers:
        assert server.address.startswith("10.231.")
        ssh = transport(ssh_lab, server.name, server.address, 22)
        assert ssh.run(["hostname"]).exit_code == 0
        ssh.close()


def test_sshd_killed_during_a_command_is_reported_not_retried(ssh_lab: SshLab) -> None:
    server = ssh_lab.start("a")
    ssh = transport(ssh_lab, "a", server.address, server.port)
    marker = ssh_lab.folder / "runs"
    ssh.run(["true"])
    # sshd and the session die while the command runs; the command ran once and is not re-run
    import threading

    def kill_soon() -> None:
        wait_for(lambda: marker.exists(), what="the command to start")
        server.kill()

    killer = threading.Thread(target=kill_soon)
    killer.start()
    started = time.monotonic()
    with pytest.raises(HostUnreachable, match="connection lost during a command"):
        ssh.run(["sh", "-c", f"echo run >> {marker}; sleep 30"], timeout=20)
    killer.join()
    assert time.monotonic() - started < 10  # noticed at once, not at the timeout
    assert marker.read_text() == "run\n"


def test_host_key_opt_out_warns_on_each_connection(ssh_lab: SshLab) -> None:
    server = ssh_lab.start("a")
    ssh_lab.known_hosts.write_text("")
    warnings: list[str] = []
    settings = ssh_settings(ssh_lab, server.port).model_copy(update={"check_host_keys": False})
    ssh = SshTransport(
        Host(name="a", address=server.address, gpus=8), settings, warn=warnings.append
    )
    assert ssh.run(["true"]).exit_code == 0
    assert warnings == [
        "a: host key not checked (check_host_keys: false in the fleet file; for test hosts only)"
    ]
    ssh.close()
