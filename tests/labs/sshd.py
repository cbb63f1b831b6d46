"""Real OpenSSH servers for tests: on loopback ports, or each in a network namespace of its
own with an address from 10.231.0.0/16 on a veth pair this module creates; the namespaces of
one lab reach each other through this machine (the hosts of one fleet talk: a router on one,
engines on the others).

Each server gets a generated host key and one authorized test key; `stop()` tears everything
down (processes, namespaces, links), also when a test failed. No traffic can leave the machine:
before anyone connects, the route to a namespace's address must go through its own veth.
The fixture `ssh_lab` is one lab a test, stopped after it (its tests start the servers they
need, a fraction of a second each, and change them: keys, homes, files).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reconciler.spec.fleet import SshSettings

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
_NAMESPACE_IDS = itertools.count(1)
_LOOPBACK_IDS = itertools.count(1)


def run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def keygen(path: Path) -> str:
    run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "denv-test", "-f", str(path))
    return Path(f"{path}.pub").read_text().strip()


@dataclass
class SshServer:
    name: str
    address: str
    port: int
    folder: Path
    namespace: str | None = None
    process: subprocess.Popen[bytes] | None = None
    host_key: str = ""

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def kill(self) -> None:
        """SIGKILL to sshd and every session it forked: connections drop at once."""
        if self.process and self.process.poll() is None:
            family = _descendants(self.process.pid)
            # sshd itself first, parents before children, so the connection drops before
            # the remote command could end and report an exit status; then what it ran.
            sshd = [self.process.pid, *(p for p in family if _command(p) == "sshd")]
            for pid in [*sshd, *(p for p in family if p not in sshd)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.process.wait(timeout=10)


@dataclass
class SshLab:
    """A set of test hosts sharing one client key and one known_hosts file. `own_home`: each
    host's sessions get HOME in its own folder, so the login shell does not read this machine's
    ~/.bashrc (here a pyenv init, about 150 ms per command) — for benchmarks. `own_addresses`:
    each host listens on a loopback address of its own, which the units it starts bind to, so
    that their ports never meet those of tests running beside it (else all are on 127.0.0.1,
    as the benchmarks' scripts and inventories expect)."""

    folder: Path
    own_home: bool = False
    own_addresses: bool = False
    servers: list[SshServer] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.client_key = self.folder / "client_key"
        self.client_public = keygen(self.client_key)
        self.known_hosts = self.folder / "known_hosts"
        self.known_hosts.write_text("")
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation folder

    def start(self, name: str, namespaced: bool = False) -> SshServer:
        folder = self.folder / name
        folder.mkdir()
        if namespaced:
            address, namespace = self._namespace()
            port = 22
        else:
            address = _loopback_address() if self.own_addresses else "127.0.0.1"
            namespace, port = None, _free_port(address)
        server = SshServer(name, address, port, folder, namespace)
        server.host_key = keygen(folder / "host_key")
        (folder / "authorized_keys").write_text(self.client_public + "\n")
        config = folder / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {port}",
                    f"ListenAddress {address}",
                    f"HostKey {folder / 'host_key'}",
                    f"PidFile {folder / 'sshd.pid'}",
                    f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "PermitRootLogin prohibit-password",
                    "StrictModes no",
                    "LogLevel ERROR",
                    "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org",
                    "MaxSessions 64",
                    "MaxStartups 200",
                    "Subsystem sftp internal-sftp",
                    # each test host keeps its own denv state, and its GPUs' claims, as
                    # separate machines would
                    f"SetEnv DENV_HOME={folder / 'denv-home'}"
                    f" DENV_GPU_CLAIMS={folder / 'gpus'}"
                    + (f" HOME={folder}" if self.own_home else ""),
                    "",
                ]
            )
        )
        self._run(server)
        self.servers.append(server)
        with self.known_hosts.open("a") as known:
            host = address if port == 22 else f"[{address}]:{port}"
            known.write(f"{host} {' '.join(server.host_key.split()[:2])}\n")
        _wait_for_banner(server)
        return server

    def _run(self, server: SshServer) -> None:
        argv = [SSHD, "-D", "-e", "-f", str(server.folder / "sshd_config")]
        if server.namespace:
            argv = ["ip", "netns", "exec", server.namespace, *argv]
        server.process = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=open(server.folder / "sshd.log", "ab"),  # noqa: SIM115
        )

    def restart(self, server: SshServer) -> None:
        """The host is back: its sshd again, same address, keys and state."""
        self._run(server)
        _wait_for_banner(server)

    def _namespace(self) -> tuple[str, str]:
        index = next(_NAMESPACE_IDS) % 250  # link names are at most 15 characters
        tag = f"{os.getpid() % 10000}x{index}"
        namespace, outside, inside = f"denvt{tag}", f"dvo{tag}", f"dvi{tag}"
        # a /30 of its own: the third octet from the pid, so test runs side by side differ
        octet, base = os.getpid() % 250, (index % 64) * 4
        subnet, near, far = f"10.231.{octet}", f"{base + 1}", f"{base + 2}"
        run("ip", "netns", "add", namespace)
        self.namespaces.append(namespace)
        run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        self.links.append(outside)
        run("ip", "link", "set", inside, "netns", namespace)
        run("ip", "addr", "add", f"{subnet}.{near}/30", "dev", outside)
        run("ip", "link", "set", outside, "up")
        inner = f"{subnet}.{far}"
        run("ip", "netns", "exec", namespace, "ip", "addr", "add", f"{inner}/30", "dev", inside)
        run("ip", "netns", "exec", namespace, "ip", "link", "set", inside, "up")
        run("ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up")
        route = run("ip", "route", "get", inner)
        if f"dev {outside}" not in route:  # never let test traffic leave this machine
            raise RuntimeError(f"route to {inner} does not use {outside}: {route}")
        # the lab's hosts reach each other (a router on one, engines on another), through
        # this machine, which forwards what comes in on these links only, and nothing else
        via = ("via", f"{subnet}.{near}")
        run("ip", "netns", "exec", namespace, "ip", "route", "add", f"{subnet}.0/24", *via)
        Path(f"/proc/sys/net/ipv4/conf/{outside}/forwarding").write_text("1\n")
        return inner, namespace

    def stop(self) -> None:
        for server in self.servers:
            server.kill()
        for link in self.links:
            subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
        for namespace in self.namespaces:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
        self.servers.clear()


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat[stat.rindex(")") + 2 :].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def resident_agents(server: SshServer) -> list[int]:
    """The host's resident denv agents: `python … <digest>.pyz serve` under its sshd."""
    found = []
    for pid in _descendants(server.pid) if server.pid else []:
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if argv[-2:] == [b"serve", b""] and any(a.endswith(b".pyz") for a in argv):
                found.append(pid)
    return found


def _loopback_address() -> str:
    """A loopback address no other server of this run has (all of 127/8 is this machine's)."""
    pid, index = os.getpid(), next(_LOOPBACK_IDS)
    return f"127.{100 + pid % 150}.{(pid // 150) % 256}.{index % 254 + 1}"


def _free_port(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_for_banner(server: SshServer, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process and server.process.poll() is not None:
            log = (server.folder / "sshd.log").read_text()
            raise RuntimeError(f"sshd {server.name} exited: {log}")
        try:
            with socket.create_connection((server.address, server.port), timeout=0.5) as sock:
                if sock.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd {server.name} did not answer on {server.address}:{server.port}")


@pytest.fixture
def ssh_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    """Real sshd servers; every one is stopped and every namespace removed afterwards. Their
    folder is not under the test's tmp_path, which is often a git work tree the test commits
    (its sshd logs, growing as they are read, must not be in it)."""
    lab = SshLab(tmp_path_factory.mktemp("ssh"), own_addresses=True)
    try:
        yield lab
    finally:
        lab.stop()


def ssh_settings(lab: SshLab, port: int = 22) -> SshSettings:
    return SshSettings(
        user="root",
        key_file=str(lab.client_key),
        port=port,
        known_hosts=str(lab.known_hosts),
        connect_timeout=3,
    )
