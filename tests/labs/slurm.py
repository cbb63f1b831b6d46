"""A real Slurm cluster for tests: Debian's slurm-wlm (22.05) daemons started by the test, one
slurmctld on this machine and compute nodes whose slurmd each runs in a network namespace of
its own, on a bridge this module creates (10.232.<pid>.0/24, no route out of it).

The lab runs its own munged (key, socket, folders under the lab's folder, never the system's);
clients reach the cluster through `env` (SLURM_CONF names the lab's slurm.conf, which names
munged's socket). Every node declares GPUs as GRES (no autodetection; each GPU's "device"
is a copy of /dev/null in the node's folder), so jobs get SLURM_JOB_GPUS on a machine without
any. A job's processes run in its node's namespace, since slurmd forks them there. `stop()`
kills every daemon and every process left in a namespace, then removes namespaces, links and
the bridge, also when a test failed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tests.labs.processes import stop_process

SBIN = ("/usr/sbin", "/usr/bin")
PARTITIONS = ("serve", "trial")  # the first is the default
GPUS_PER_NODE = 4


def program(name: str) -> str | None:
    return shutil.which(name) or next(
        (f"{d}/{name}" for d in SBIN if os.access(f"{d}/{name}", os.X_OK)), None
    )


def installed() -> bool:
    return all(program(p) for p in ("slurmctld", "slurmd", "sbatch", "munged"))


def run(*argv: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class SlurmNode:
    name: str
    address: str
    namespace: str
    process: subprocess.Popen[bytes] | None = None


@dataclass
class SlurmLab:
    """`node_count` compute nodes named n1.., each with GPUS_PER_NODE GPUs, in partitions `serve`
    (the default) and `trial`, both over every node."""

    folder: Path
    node_count: int = 3
    nodes: list[SlurmNode] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._slot = _claim_slot()  # held until the process ends: no two labs share a subnet
        self.tag = f"{self._slot.number}"
        self.subnet = f"10.232.{self._slot.number}"
        self.controller_address = f"{self.subnet}.1"
        self.conf = self.folder / "slurm.conf"
        self.munge_socket = self.folder / "munge" / "munge.socket"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        for name in ("SLURM_JOB_ID", "SLURM_JOBID"):  # never inherit a job of another cluster
            self.env.pop(name, None)

    def start(self) -> None:
        """Bring the cluster up (every node registered); on failure, tear down what started."""
        try:
            self._network()
            self._munge()
            self._write_config()
            self._controller()
            for node in self.nodes:
                self._slurmd(node)
            self.wait_until_idle()
        except BaseException:
            self.stop()
            raise

    # the network: a bridge on this machine, one namespace per node

    def _network(self) -> None:
        bridge = f"dsb{self.tag}"
        run("ip", "link", "add", bridge, "type", "bridge")
        self.links.append(bridge)
        run("ip", "addr", "add", f"{self.controller_address}/24", "dev", bridge)
        run("ip", "link", "set", bridge, "up")
        for index in range(1, self.node_count + 1):
            self.nodes.append(self._node(f"n{index}", f"{self.subnet}.{10 + index}", bridge))

    def _node(self, name: str, address: str, bridge: str) -> SlurmNode:
        namespace, outside, peer = (
            f"dsl{self.tag}{name}",
            f"dso{self.tag}{name}",
            f"dsi{self.tag}{name}",
        )
        run("ip", "netns", "add", namespace)
        self.namespaces.append(namespace)
        run("ip", "link", "add", outside, "type", "veth", "peer", "name", peer)
        self.links.append(outside)
        run("ip", "link", "set", peer, "netns", namespace)
        inside = ("ip", "netns", "exec", namespace, "ip")
        run(*inside, "link", "set", peer, "name", "eth0")
        run(*inside, "addr", "add", f"{address}/24", "dev", "eth0")
        run(*inside, "link", "set", "eth0", "up")
        run(*inside, "link", "set", "lo", "up")
        run("ip", "link", "set", outside, "master", bridge)
        run("ip", "link", "set", outside, "up")
        route = run("ip", "route", "get", address)
        if f"dev {bridge}" not in route:  # never let test traffic leave this machine
            raise RuntimeError(f"route to {address} does not use {bridge}: {route}")
        return SlurmNode(name, address, namespace)

    # the daemons

    def _munge(self) -> None:
        folder = self.munge_socket.parent
        folder.mkdir(mode=0o700)
        key = folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._spawn(
            [
                program("munged") or "munged",
                "--foreground",
                "--force",
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={folder / 'munged.pid'}",
                f"--log-file={folder / 'munged.log'}",
                f"--seed-file={folder / 'munged.seed'}",
            ],
            folder / "munged.out",
        )
        _wait(lambda: self.munge_socket.exists(), "munged's socket", self.processes[-1])

    def _write_config(self) -> None:
        (self.folder / "ctld").mkdir()
        (self.folder / "plugstack.conf").write_text("")
        names = ",".join(node.name for node in self.nodes)
        lines = [
            "ClusterName=denvlab",
            f"SlurmctldHost={socket.gethostname().split('.')[0]}({self.controller_address})",
            f"SlurmctldPort={_free_port()}",
            "SlurmdPort=6818",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.folder / 'ctld'}",
            f"SlurmctldPidFile={self.folder / 'ctld' / 'slurmctld.pid'}",
            f"SlurmctldLogFile={self.folder / 'ctld' / 'slurmctld.log'}",
            f"SlurmdSpoolDir={self.folder / 'nodes' / '%n'}",
            f"SlurmdPidFile={self.folder / 'nodes' / '%n' / 'slurmd.pid'}",
            f"SlurmdLogFile={self.folder / 'nodes' / '%n' / 'slurmd.log'}",
            f"PlugStackConfig={self.folder / 'plugstack.conf'}",
            f"TmpFS={self.folder / 'tmp'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "SchedulerType=sched/builtin",
            # a batch job starts at the next tick of slurmctld's 1 s loop, not up to 3 s later
            "SchedulerParameters=batch_sched_delay=0",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "GresTypes=gpu",
            # every slurmd shares this machine's CPUs and memory: report what is configured
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "SlurmctldTimeout=10",
            "SlurmdTimeout=30",
            "MessageTimeout=10",
            "KillWait=2",
            "MinJobAge=30",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            *(
                f"NodeName={node.name} NodeAddr={node.address} NodeHostname={node.name}"
                f" CPUs=8 RealMemory=8000 Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN"
                for node in self.nodes
            ),
            *(
                f"PartitionName={partition} Nodes={names} Default={'YES' if index == 0 else 'NO'}"
                " MaxTime=INFINITE State=UP"
                for index, partition in enumerate(PARTITIONS)
            ),
            "",
        ]
        self.conf.write_text("\n".join(lines))
        # slurmd 22.05 drops a GPU without File= ("Removing file-less GPU"), and wants a
        # character device there: each node's GPUs are copies of /dev/null in its folder
        gres = ["AutoDetect=off"]
        for node in self.nodes:
            devices = self.folder / "nodes" / node.name / "dev"
            devices.mkdir(parents=True)
            for index in range(GPUS_PER_NODE):
                os.mknod(devices / f"gpu{index}", stat.S_IFCHR | 0o600, os.makedev(1, 3))
            files = f"{devices}/gpu[0-{GPUS_PER_NODE - 1}]"
            gres.append(f"NodeName={node.name} Name=gpu File={files}")
        (self.folder / "gres.conf").write_text("\n".join([*gres, ""]))
        # slurmd 22.05 always loads a cgroup plugin; nothing here uses it, and autodetection
        # fails where /sys/fs/cgroup is a tmpfs of v1 hierarchies (containers)
        (self.folder / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
        (self.folder / "tmp").mkdir()

    def _controller(self) -> None:
        ctld = self.folder / "ctld"
        self._spawn([program("slurmctld") or "slurmctld", "-D"], ctld / "slurmctld.out")
        process = self.processes[-1]
        _wait(lambda: self._answers(), "slurmctld to answer", process, ctld / "slurmctld.log")

    def _answers(self) -> bool:
        done = subprocess.run(
            ["scontrol", "ping"], capture_output=True, text=True, env=self.env, check=False
        )
        return "UP" in done.stdout

    def _slurmd(self, node: SlurmNode) -> None:
        folder = self.folder / "nodes" / node.name
        argv = ["ip", "netns", "exec", node.namespace, program("slurmd") or "slurmd"]
        node.process = self._spawn([*argv, "-D", "-N", node.name], folder / "slurmd.out")

    def _spawn(self, argv: list[str], output: Path) -> subprocess.Popen[bytes]:
        with output.open("ab") as out:
            process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )
        self.processes.append(process)
        return process

    # what the tests ask

    def run(self, *argv: str) -> str:
        """A Slurm client command against this cluster; its output."""
        return run(*argv, env=self.env)

    def node(self, name: str) -> SlurmNode:
        return next(node for node in self.nodes if node.name == name)

    def sinfo(self) -> list[dict[str, str]]:
        """One row per node and partition: node, partition (the default with a `*`), state
        (short: idle, alloc, mix, drain...), gres. (22.05's `sinfo --json` works too, as
        openapi v0.0.38, a shape that changes with Slurm's versions.)"""
        out = self.run("sinfo", "-N", "-h", "-o", "%N|%P|%t|%G")
        keys = ("node", "partition", "state", "gres")
        return [dict(zip(keys, line.split("|"), strict=True)) for line in out.splitlines()]

    def wait_until_idle(self, timeout: float = 30.0) -> None:
        def idle() -> bool:
            rows = self.sinfo()
            states = {row["node"]: row["state"] for row in rows}
            return len(states) == len(self.nodes) and all(s == "idle" for s in states.values())

        _wait(idle, "every node idle", None, self.folder / "ctld" / "slurmctld.log", timeout)

    def stop(self) -> None:
        """SIGKILL to everything in the nodes' namespaces (slurmd, slurmstepd, the jobs), then
        slurmctld and munged; links and namespaces removed. Safe to call again."""
        for namespace in self.namespaces:
            self._kill_namespace(namespace)
        for process in reversed(self.processes):
            stop_process(process, grace=5)
        for link in self.links:
            subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
        for namespace in self.namespaces:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
        self.processes.clear()
        self.links.clear()
        self.namespaces.clear()
        self._slot.lock.close()  # the subnet is free again

    def _kill_namespace(self, namespace: str) -> None:
        for _ in range(50):
            for process in self.processes:
                process.poll()  # our slurmd, once killed, is no zombie listed in the namespace
            done = subprocess.run(
                ["ip", "netns", "pids", namespace], capture_output=True, text=True, check=False
            )
            pids = [int(p) for p in done.stdout.split()]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)


def _wait(
    ready: Callable[[], bool],
    what: str,
    process: subprocess.Popen[bytes] | None,
    log: Path | None = None,
    timeout: float = 20.0,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            break
        if ready():
            return
        time.sleep(0.1)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    raise RuntimeError(f"Slurm lab: waited for {what}\n{tail}")


@dataclass
class _Slot:
    number: int
    lock: IO[str]  # the open lock file: the claim lasts as long as it stays open


def _claim_slot() -> _Slot:
    """A subnet number (0…249) no other lab on this machine holds: the first from this
    process's id on whose lock file an exclusive flock succeeds."""
    start = os.getpid() % 250
    for offset in range(250):
        number = (start + offset) % 250
        handle = open(f"/tmp/denv-slurm-lab-{number}.lock", "w")  # noqa: SIM115
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        return _Slot(number, handle)
    raise RuntimeError("no free subnet for a Slurm lab (250 labs running?)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        port: int = probe.getsockname()[1]
        return port
