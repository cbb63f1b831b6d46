"""Pure logic: how each host of a fleet runs its units — the runtime (container, venv, or the
simulator) from the fleet file and what the agent reported, and where the weights sit.

The agent's home (the fleet's kind says it: FleetRules.home) is the same on every host of a
fleet, so a deployment's weights path is the same on every host.
"""

from __future__ import annotations

import hashlib

from reconciler.engines.runtime import HostRuntime, Runnable, Vendor, choose_runtime, in_runtime
from reconciler.engines.units import Unit
from reconciler.fleet.model.observed import FleetObservation
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import Fleet


def weights_dir(home: str, source: str) -> str:
    """Where the agent caches `source` (host/weights.py keys its cache the same way)."""
    return f"{home}/weights/{hashlib.sha256(source.encode()).hexdigest()[:16]}"


def host_runtimes(
    fleet: Fleet, hardware: Hardware, observation: FleetObservation | None, home: str
) -> dict[str, HostRuntime]:
    """host -> its runtime (hosts not observed: as if they had no container engine, and the
    fleet's `home`)."""
    vendor: Vendor = "amd" if hardware.vendor == "amd" else "nvidia"
    vendor = "cpu" if hardware.vendor == "cpu" else vendor
    found: dict[str, HostRuntime] = {}
    for host in fleet.hosts:
        seen = observation.hosts.get(host.name) if observation is not None else None
        engine = seen.container_engine if seen is not None else None
        found[host.name] = choose_runtime(
            fleet.runtime,
            fleet.simulated,
            engine if engine in ("docker", "podman") else None,  # type: ignore[arg-type]
            seen.home if seen is not None and seen.home else home,
            vendor,
        )
    return found


def runnable(
    unit: Unit,
    unit_id: str,
    version: str,
    image: str | None,
    runtime: HostRuntime,
    weights: str | None,
) -> Runnable:
    """The unit as its host runs it, with what must be prepared there first."""
    mount = weights_dir(runtime.home, weights) if weights is not None else None
    return in_runtime(unit, unit_id, version, runtime, image, mount)
