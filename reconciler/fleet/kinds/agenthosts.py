"""Pure logic: how units run on the hosts of the kinds with denv's agent (local, ssh, and the
nodes of a Slurm fleet, whose jobs run the same command) — each host's runtime (container,
venv, or the simulator) from the fleet file and what the agent reported, and where the weights
sit. Those kinds' cards (reconciler/fleet/kinds/) take these parts from here.

Paths are each host's own. A host reports its agent's home when it is probed (an absolute
path: the observation model refuses any other); a unit's paths under it — its venv, its weights
— are made from that host's own report, or, for a host not observed, from the kind's default
(FleetRules.default_home): never from another host's. An engine is rendered once per
deployment with its weights at HOME (a placeholder), which `runnable` replaces by the home of
the host the unit runs on.
"""

from __future__ import annotations

import hashlib
from typing import Any

from reconciler.engines.runtime import HostRuntime, Runnable, Vendor, choose_runtime, in_runtime
from reconciler.engines.units import Unit
from reconciler.fleet.kinds.cards import JobLine
from reconciler.fleet.model.observed import FleetObservation
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import Fleet

# The card parts the agent kinds (local, ssh) take from here whole.
__all__ = [
    "AGENTS_USER",
    "ONE_JOB_PER_REPLICA",
    "host_runtimes",
    "jobs",
    "model_path",
    "runnable",
    "view",
]

# The parts the agent kinds' cards share where the kind does not say otherwise: a replica's
# hosts each run their own process, trial engines that are processes run as `trial_user`, and
# the hosts' rows say all of a fleet's status.
ONE_JOB_PER_REPLICA = False
AGENTS_USER = None


def view(fleet: Fleet, seen: FleetObservation) -> dict[str, Any] | None:
    return None


def jobs(fleet: Fleet, units: list[Unit], trial: bool) -> dict[str, JobLine]:
    return {}


HOME = "@agent-home@"  # in a unit's paths until `runnable` puts its host's own home there


def weights_dir(home: str, source: str) -> str:
    """Where the agent caches `source` (host/weights.py keys its cache the same way)."""
    return f"{home}/weights/{hashlib.sha256(source.encode()).hexdigest()[:16]}"


def model_path(source: str) -> str:
    """The engine's weights, as rendered once for every host of a deployment."""
    return weights_dir(HOME, source)


def host_runtimes(
    fleet: Fleet, hardware: Hardware, observation: FleetObservation | None, home: str
) -> dict[str, HostRuntime]:
    """host -> its runtime, with its own home (hosts not observed: as if they had no
    container engine, and the kind's default `home`)."""
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
    """The unit as its host runs it, with what must be prepared there first; its paths under
    HOME are the host's own."""
    mount = weights_dir(runtime.home, weights) if weights is not None else None
    return in_runtime(on_host(unit, runtime.home), unit_id, version, runtime, image, mount)


def on_host(unit: Unit, home: str) -> Unit:
    """The unit with HOME in its arguments and environment replaced by `home`."""
    argv = [arg.replace(HOME, home) for arg in unit.argv]
    env = {key: value.replace(HOME, home) for key, value in unit.env.items()}
    if argv == list(unit.argv) and env == unit.env:
        return unit
    return unit.model_copy(update={"argv": argv, "env": env})
