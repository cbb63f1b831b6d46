"""The ssh transport and the agent over real sshd: loopback and network namespaces."""

from __future__ import annotations

import re
import sys
import time

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.model.observed import Cause
from reconciler.fleet.ssh import SshTransport
from reconciler.fleet.transport import HostUnreachable
from reconciler.spec.fleet import Host
from tests.fleet.conftest import SilentListener, wait_for
from tests.labs.sshd import SshLab, keygen, ssh_settings


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
    with pytest.raises(HostUnreachable, match=r"a .* not reached: host key unknown — ") as e:
        transport(ssh_lab, "a", server.address, server.port).run(["true"])
    assert e.value.cause == Cause.HOST_KEY_UNKNOWN


@pytest.mark.serial  # bounds the time a refused dial takes
def test_unreachable_host_is_a_clear_error_quickly(ssh_lab: SshLab) -> None:
    server = ssh_lab.start("a")
    server.kill()
    started = time.monotonic()
    where = re.escape(f"a ({server.address}:{server.port}) not reached: refused")
    with pytest.raises(HostUnreachable, match=where) as e:
        transport(ssh_lab, "a", server.address, server.port).run(["true"])
    assert time.monotonic() - started < 10
    assert e.value.cause == Cause.REFUSED


def test_a_host_whose_banner_never_comes_times_out_once(
    ssh_lab: SshLab, silent: SilentListener
) -> None:
    """TCP connects at once, then nothing: the banner timeout ends the dial, and the whole
    connect timeout is spent, so it is not dialled again."""
    ssh = transport(ssh_lab, "quiet", "127.0.0.1", silent.port)
    ssh.settings = ssh.settings.model_copy(update={"connect_timeout": 1})
    with pytest.raises(HostUnreachable) as e:
        ssh.run(["true"])
    assert e.value.cause == Cause.TIMED_OUT
    assert str(e.value).startswith(f"quiet (127.0.0.1:{silent.port}) not reached: timed out — ")
    assert "\n" not in str(e.value)
    assert silent.accepted == 1


def test_a_key_the_host_does_not_accept_is_auth_failed(ssh_lab: SshLab) -> None:
    server = ssh_lab.start("a")
    (server.folder / "authorized_keys").write_text(keygen(ssh_lab.folder / "other") + "\n")
    with pytest.raises(HostUnreachable, match=r"not reached: auth failed — user root, key ") as e:
        transport(ssh_lab, "a", server.address, server.port).run(["true"])
    assert e.value.cause == Cause.AUTH_FAILED


def test_a_changed_host_key_is_refused_with_what_to_do(ssh_lab: SshLab) -> None:
    server = ssh_lab.start("a")
    other = keygen(ssh_lab.folder / "other-host").split()
    ssh_lab.known_hosts.write_text(f"[{server.address}]:{server.port} {other[0]} {other[1]}\n")
    with pytest.raises(HostUnreachable, match=r"not reached: host key changed — ") as e:
        transport(ssh_lab, "a", server.address, server.port).run(["true"])
    assert e.value.cause == Cause.HOST_KEY_CHANGED
    assert f"ssh-keygen -R '[{server.address}]:{server.port}'" in str(e.value)


def test_an_example_host_is_never_dialled(ssh_lab: SshLab) -> None:
    host = Host(name="h200-01", address="h200-01.h200-use1.example", gpus=8)
    ssh = SshTransport(host, ssh_settings(ssh_lab), fleet="h200-use1")
    with pytest.raises(HostUnreachable) as e:
        ssh.run(["true"])
    assert e.value.cause == Cause.EXAMPLE_HOST
    assert str(e.value) == (
        "h200-01 (h200-01.h200-use1.example:22) not reached: example host — a name reserved "
        "for documentation; replace it in fleets/h200-use1.yaml"
    )


def test_hosts_in_network_namespaces(ssh_lab: SshLab) -> None:
    servers = [ssh_lab.start(name, namespaced=True) for name in ("n1", "n2")]
    assert [s.address for s in servers] != ["127.0.0.1", "127.0.0.1"]
    for server in servers:
        assert server.address.startswith("10.231.")
        ssh = transport(ssh_lab, server.name, server.address, 22)
        assert ssh.run(["hostname"]).exit_code == 0
        ssh.close()


@pytest.mark.serial  # bounds the time a lost connection takes to be noticed
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
