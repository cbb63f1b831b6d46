"""Adapter: observing a fleet — one agent call per host, hosts in parallel with a limit, and
a clear per-host error for a host that cannot be reached while the others carry on: one line
that starts with the host's name, and its cause."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from reconciler.errors import DenvError
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.observed import HostObservation
from reconciler.fleet.ssh import SshTransport
from reconciler.fleet.transport import Cause, HostUnreachable, LocalTransport, Transport
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import Fleet, Host

MAX_PARALLEL_HOSTS = 32


@dataclass
class FleetObservation:
    fleet: str
    hosts: dict[str, HostObservation] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # host -> why it was not observed
    causes: dict[str, Cause] = field(default_factory=dict)  # host -> the cause, in a word

    def unreached(self) -> str:
        """The hosts that did not answer, each with its cause: `n0 (timed out), n1 (refused)`."""
        return ", ".join(
            f"{host} ({self.causes.get(host, Cause.FAILED)})" for host in sorted(self.errors)
        )

    def free_gpus(self, host: str, trial: set[int] | None = None) -> list[int]:
        """GPU indices that no unit and no foreign process uses (trial GPUs left out)."""
        seen = self.hosts[host]
        taken = {index for unit in seen.units if unit.alive for index in unit.gpus}
        busy = {gpu.index for gpu in seen.gpus if gpu.processes}
        return [gpu.index for gpu in seen.gpus if gpu.index not in taken | busy | (trial or set())]


class Transports:
    """One open transport per host, kept across observations (SSH connections are costly)."""

    def __init__(
        self,
        warn: Callable[[str], None] = lambda _m: None,
        local_env: Mapping[str, str] | None = None,
        dial: Callable[[Fleet, Host], Transport] | None = None,
    ) -> None:
        self.warn = warn
        self.local_env = local_env
        self.dial = dial or self._dial
        self._open: dict[tuple[str, str], Transport] = {}

    def _dial(self, fleet: Fleet, host: Host) -> Transport:
        if fleet.transport == "local":
            return LocalTransport(host.name, env=self.local_env)
        assert fleet.ssh is not None  # the fleet model requires it for ssh
        return SshTransport(host, fleet.ssh, warn=self.warn, fleet=fleet.name)

    def get(self, fleet: Fleet, host: Host) -> Transport:
        key = (fleet.name, host.name)
        if key not in self._open:
            self._open[key] = self.dial(fleet, host)
        return self._open[key]

    def close(self) -> None:
        for transport in self._open.values():
            transport.close()
        self._open.clear()


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


def observe(
    fleet: Fleet, transports: Transports, hardware: Hardware | None, python: str = "python3"
) -> FleetObservation:
    """Probe every host of the fleet: GPUs and units, one round trip per host."""
    found = FleetObservation(fleet.name)

    def probe(host: Host) -> tuple[str, HostObservation | DenvError]:
        try:
            agent = AgentClient(transports.get(fleet, host), python=python)
            declared = simulated_gpus(fleet, host, hardware) if fleet.simulated else None
            return host.name, agent.probe(declared)
        except DenvError as exc:
            return host.name, exc

    workers = min(MAX_PARALLEL_HOSTS, max(1, len(fleet.hosts)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for name, outcome in pool.map(probe, fleet.hosts):
            if isinstance(outcome, DenvError):
                message = str(outcome)
                found.errors[name] = message if message.startswith(name) else f"{name}: {message}"
                found.causes[name] = (
                    outcome.cause if isinstance(outcome, HostUnreachable) else Cause.FAILED
                )
            else:
                found.hosts[name] = outcome
    return found
