"""Models: what a fleet's driver observes — GPUs and denv's units on each host (as the host
agent reports them), and the hosts that did not answer, each with its cause."""

from __future__ import annotations

import ipaddress
import posixpath
from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

METRIC_NAME = r"^[a-zA-Z_:][a-zA-Z0-9_:]{0,200}$"  # Prometheus' rule for a metric's name


class Cause(StrEnum):
    """Why a host was not reached: one word or two, shown beside the host's name."""

    REFUSED = "refused"  # nothing listens on the port
    TIMED_OUT = "timed out"  # no TCP connection, SSH banner or handshake within the timeout
    NO_ROUTE = "no route"  # the network says the address cannot be reached
    UNKNOWN_NAME = "unknown name"  # the name does not resolve
    AUTH_FAILED = "auth failed"  # the host refused the user and key
    HOST_KEY_CHANGED = "host key changed"  # known_hosts has another key for it
    HOST_KEY_UNKNOWN = "host key unknown"  # known_hosts has no key for it
    CLOSED = "closed"  # the host dropped the connection during the handshake
    EXAMPLE_HOST = "example host"  # a name reserved for documentation: replace it
    BAD_ANSWER = "bad answer"  # its agent answered something that is not a valid answer
    # its agent cannot read a record (a unit's): what runs there is not known, until repaired
    UNREADABLE = "unreadable record"
    FAILED = "failed"  # anything else: the message says what

    @property
    def retryable(self) -> bool:
        """Whether dialling again may help (a host restarting); a refused key never changes."""
        return self in (Cause.REFUSED, Cause.TIMED_OUT, Cause.NO_ROUTE, Cause.CLOSED)


class Observed(BaseModel):
    """Agent answers: tolerant of keys a newer agent adds, frozen once read."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class GpuProcess(Observed):
    pid: int
    used_mib: int | None = None


class Gpu(Observed):
    index: int
    uuid: str | None = None
    name: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    processes: tuple[GpuProcess, ...] = ()
    domain: str | None = None  # NVLink domain (fabric cluster/clique) where the driver says


# Slurm's job states before a job ends (the agent's ACTIVE, fleet/host/slurm.py): it waits,
# holds its nodes or will again.
ACTIVE_JOB_STATES = frozenset(
    ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
     "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED")
)  # fmt: skip


class RecordedMetrics(Observed):
    """Where a unit's Prometheus metrics are on its port, and its gauges of requests running
    and queued: what a drain asks, also once git no longer has the unit's deployment."""

    # a host's answer: a path on the unit's own port, Prometheus names, nothing else
    path: str = Field(pattern=r"^/[A-Za-z0-9._/-]{0,200}$")
    running: str = Field(pattern=METRIC_NAME)
    waiting: str | None = Field(default=None, pattern=METRIC_NAME)


class UnitRecord(Observed):
    id: str
    digest: str
    argv: tuple[str, ...] = ()
    port: int | None = None
    metrics: RecordedMetrics | None = None  # None: launched without (a router, an older agent)
    gpus: tuple[int, ...] = ()
    pid: int | None = None
    start_time: int | None = None
    started_at: float | None = None
    restart: bool = False  # its supervisor starts it again when it exits (a router)
    restarts: int = 0
    exit_code: int | None = None
    exited_at: float | None = None
    log: str | None = None
    log_error: str | None = None
    alive: bool = False
    exiting: bool = False  # exited; its supervisor is about to record the exit code
    env: dict[str, str] = {}
    labels: dict[str, str] = {}  # what the reconciler launched it as: release, stage, fleet, …
    # A unit that runs as a scheduler's job (a Slurm fleet): the job, its state in the queue
    # (PENDING, RUNNING, CANCELLED, TIMEOUT, …) and the scheduler's reason, its nodes.
    job: str | None = None
    queue: str | None = None
    queue_reason: str | None = None
    nodes: tuple[str, ...] = ()
    partition: str | None = None

    @property
    def pending(self) -> bool:
        """Waiting in the scheduler's queue: neither running nor ended."""
        return self.queue == "PENDING"

    @property
    def ended_job(self) -> bool:
        """A scheduler's job that ended (the queue remembers it a while): neither a unit that
        runs nor one to stop. A job whose node boots (CONFIGURING) or that is ending
        (COMPLETING) has not."""
        return self.queue is not None and self.queue not in ACTIVE_JOB_STATES


class HostObservation(Observed):
    host: str
    source: str  # nvml, amdsmi, nvidia-smi, amd-smi, simulated or none
    driver: str | None = None
    runtime: str | None = None
    gpus: tuple[Gpu, ...] = ()
    units: tuple[UnitRecord, ...] = ()
    tried: tuple[str, ...] = ()
    home: str | None = None  # the agent's state folder (DENV_HOME) on the host
    container_engine: str | None = None  # docker or podman when on PATH
    listening: tuple[int, ...] = ()  # TCP ports some process listens on (denv's units too)
    # of those, the ports held only on loopback addresses (127.0.0.0/8), by address
    loopback_listening: dict[str, tuple[int, ...]] = {}
    # Takes nothing new, and what runs there moves elsewhere: a Slurm node drained or down.
    cordoned: str | None = None  # why (the scheduler's state and reason)
    scheduler_state: str | None = None  # a Slurm node's: idle, mixed, allocated, drained, …

    def taken_ports(self, address: str) -> tuple[int, ...]:
        """The listening ports a unit bound to `address` cannot take: all of them, except,
        for a loopback address, those held only on other loopback addresses (local fleets on
        addresses of their own share the machine, not their ports)."""
        if not _loopback(address):
            return self.listening
        mine = set(self.loopback_listening.get(address, ()))
        others = {p for a, ports in self.loopback_listening.items() if a != address for p in ports}
        return tuple(p for p in self.listening if p in mine or p not in others)

    @field_validator("home")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        """The host's own paths are computed from it: an absolute, normal path or nothing."""
        if value is None:
            return None
        path = value.rstrip("/")
        if (
            not value.startswith("/")
            or not path
            or path.startswith("//")
            or posixpath.normpath(path) != path
            or any(ord(c) < 32 or ord(c) == 127 for c in path)
        ):
            raise ValueError("must be an absolute path without . or .. parts (DENV_HOME)")
        return path


@dataclass
class FleetObservation:
    fleet: str
    hosts: dict[str, HostObservation] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # host -> why it was not observed
    causes: dict[str, Cause] = field(default_factory=dict)  # host -> the cause, in a word
    unreadable: dict[str, str] = field(default_factory=dict)  # host -> the record's path
    # host not reached -> the routers last seen there that answer their worker API now:
    # kept where they run, as if observed (reconcile/routers_seen.py)
    answering: dict[str, tuple[UnitRecord, ...]] = field(default_factory=dict)

    @classmethod
    def failed(cls, fleet: str, hosts: list[str], reason: str) -> FleetObservation:
        """No host of the fleet observed, for one reason: each one unreached with it."""
        found = cls(fleet)
        for host in hosts:
            found.errors[host] = f"{host}: {reason}"
            found.causes[host] = Cause.FAILED
        return found

    def unreached(self) -> str:
        """The hosts that did not answer, each with its cause: `n0 (timed out), n1 (refused)`."""
        return ", ".join(f"{host} ({self.cause_text(host)})" for host in sorted(self.errors))

    def cause_text(self, host: str) -> str:
        """Why `host` was not observed, in a word; with the file, for an unreadable record
        (what the operator repairs)."""
        cause = self.causes.get(host, Cause.FAILED)
        if cause == Cause.UNREADABLE and host in self.unreadable:
            return f"{cause} {self.unreadable[host]}"
        return str(cause)

    def free_gpus(self, host: str, trial: set[int] | None = None) -> list[int]:
        """GPU indices that no unit and no foreign process uses (trial GPUs left out)."""
        seen = self.hosts[host]
        taken = {index for unit in seen.units if unit.alive for index in unit.gpus}
        busy = {gpu.index for gpu in seen.gpus if gpu.processes}
        return [gpu.index for gpu in seen.gpus if gpu.index not in taken | busy | (trial or set())]


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False  # a name: whatever it resolves to, every listener counts
