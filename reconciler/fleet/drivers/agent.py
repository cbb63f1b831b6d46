"""Adapter: the part of a driver shared by fleets whose hosts run denv's agent — one transport
and one agent client per host (opened on first use, kept across passes: SSH connections are
costly), the agent resident on it (one message per call; one-shot where `resident` is off),
every verb one agent call, and observing as one call per host, hosts in parallel with a
limit, with a clear per-host error for a host that cannot be reached while the others carry
on: one line that starts with the host's name, and its cause. A kind of fleet says how to
dial a host and its own rules (address, home, python)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from threading import Lock
from typing import Any

from reconciler.errors import DenvError
from reconciler.fleet.hostagent import DEADLINE, AgentClient, RecordUnreadable
from reconciler.fleet.model.answers import LeaseAnswer, RepairAnswer
from reconciler.fleet.model.observed import Cause, FleetObservation, HostObservation, UnitRecord
from reconciler.fleet.transport import HostUnreachable, Transport
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import Fleet, Host

MAX_PARALLEL_HOSTS = 32


def simulated_gpus(fleet: Fleet, host: Host, hardware: Hardware | None) -> dict[str, object]:
    """What the agent reports for a host of simulated GPUs."""
    name = hardware.name if hardware else fleet.hardware
    return {
        "count": host.gpus,
        "name": f"{name} (simulated)",
        "host": host.name,
        "memory_gb": hardware.memory_gb if hardware else 0,
        "domain": host.domain,
    }


def declared_devices(
    fleet: Fleet, host: Host, hardware: Hardware | None
) -> dict[str, object] | None:
    """The devices the agent reports as the fleet file declares them, where no library can
    find them: simulated GPUs, or the cores of a CPU fleet (each one a replica's, as a GPU
    would be; the agent lists denv's units on them). None: the agent probes the GPUs."""
    if fleet.simulated:
        return simulated_gpus(fleet, host, hardware)
    if hardware is not None and hardware.vendor == "cpu":
        return {
            "count": host.gpus,
            "name": hardware.name,
            "host": host.name,
            "memory_gb": hardware.memory_gb,
            "domain": None,
            "source": "cpu",
        }
    return None


def unreached(found: FleetObservation, host: str, error: DenvError) -> None:
    """`host` was not observed: one line that starts with its name, and its cause."""
    message = str(error)
    found.errors[host] = message if message.startswith(host) else f"{host}: {message}"
    found.causes[host] = error.cause if isinstance(error, HostUnreachable) else Cause.FAILED
    if isinstance(error, RecordUnreadable):  # it answered: what runs there is not known
        found.causes[host] = Cause.UNREADABLE
        found.unreadable[host] = error.path


class AgentDriver:
    """A fleet whose hosts run the agent; subclasses dial and give the kind's rules."""

    def __init__(
        self,
        fleet: Fleet,
        warn: Callable[[str], None] = lambda _m: None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.fleet = fleet
        self.warn = warn
        self.env = env
        self.resident = True  # off for one-shot commands (`denv fleet probe` from a laptop)
        self.fence: str | None = None  # the lease's "fleet:epoch" that every call carries
        self._open: dict[str, AgentClient] = {}
        self._opening = Lock()

    # --- the kind's part -----------------------------------------------------------------

    def dial(self, host: Host) -> Transport:
        """A transport to `host`; it connects on its first command."""
        raise NotImplementedError

    @property
    def python(self) -> str:
        return self.fleet.python

    @property
    def deadline(self) -> float:
        """Seconds an agent call may take beyond its own wait."""
        return self.fleet.ssh.call_timeout if self.fleet.ssh is not None else DEADLINE

    def address(self, host: Host) -> str:
        return host.address if host.address is not None else host.name

    def default_home(self) -> str:
        """Where the agent keeps its state on the hosts: the fleet's `agent_home`, else the
        kind's default (`user_home`)."""
        return self.fleet.agent_home or self.user_home()

    def user_home(self) -> str:
        raise NotImplementedError

    # --- agents --------------------------------------------------------------------------

    def agent(self, host: str) -> AgentClient:
        """The host's client, kept (with its connection and resident agent) until `close`."""
        with self._opening:
            client = self._open.get(host)
            if client is None:
                spec = next((h for h in self.fleet.hosts if h.name == host), None)
                if spec is None:
                    raise DenvError(f"fleet {self.fleet.name} has no host {host}")
                client = AgentClient(
                    self.dial(spec),
                    python=self.python,
                    resident=self.resident,
                    home=self.fleet.agent_home,
                    fleet=self.fleet.name,
                )
                self._open[host] = client
            client.deadline = self.deadline  # the fleet file as read now
            client.fence = self.fence
            return client

    def observe(self, hardware: Hardware | None) -> FleetObservation:
        """Probe every host of the fleet: GPUs and units, one round trip per host."""
        fleet = self.fleet
        found = FleetObservation(fleet.name)
        for host in fleet.hosts:  # made here, not in the pool's threads; they connect later
            self.agent(host.name)

        def probe(host: Host) -> tuple[str, HostObservation | DenvError]:
            try:
                declared = declared_devices(fleet, host, hardware)
                return host.name, self.agent(host.name).probe(declared)
            except DenvError as exc:
                return host.name, exc

        workers = min(MAX_PARALLEL_HOSTS, max(1, len(fleet.hosts)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for name, outcome in pool.map(probe, fleet.hosts):
                if isinstance(outcome, DenvError):
                    unreached(found, name, outcome)
                else:
                    found.hosts[name] = outcome
        return found

    def prepare(self, host: str, payload: Mapping[str, Any], wait: float) -> Any:
        return self.agent(host).prepare(payload, wait)

    def launch(self, host: str, unit: Mapping[str, Any]) -> UnitRecord:
        return self.agent(host).launch(dict(unit))

    def stop(self, host: str, unit_id: str, grace: float = 10.0) -> dict[str, Any]:
        return self.agent(host).stop(unit_id, grace=grace)

    def units(self, host: str) -> list[UnitRecord]:
        return self.agent(host).units()

    def repair(self, host: str, grace: float = 10.0) -> RepairAnswer:
        """Mend `host`'s records that cannot be read (a lease file, unit records)."""
        return self.agent(host).repair(grace)

    def logs(self, host: str, unit_id: str, tail: int = 100) -> dict[str, Any]:
        return self.agent(host).logs(unit_id, tail)

    def runtimes(self, host: str) -> dict[str, Any]:
        return self.agent(host).runtimes()

    def lease(
        self,
        name: str,
        holder: str,
        ttl: float,
        release: bool = False,
        note: Any = None,
        peek: bool = False,
    ) -> LeaseAnswer:
        """Kept by the agent of the lease's host."""
        return self.agent(self.lease_host).lease(
            name, holder, ttl, release=release, note=note, peek=peek
        )

    @property
    def lease_host(self) -> str:
        """The host whose agent keeps the fleet's leases: its first."""
        return self.fleet.hosts[0].name

    def close(self) -> None:
        with self._opening:
            clients = list(self._open.values())
            self._open.clear()
        for client in clients:
            client.close()
            client.transport.close()
