"""Pure logic: the card of the `ssh` kind of fleet — hosts reached over SSH, where denv's
agent runs each unit as a process of its own (reconciler.fleet.drivers.ssh). Units run in the
container or venv runtime, or as the simulator (agenthosts)."""

from __future__ import annotations

from typing import Any

from reconciler.fleet.kinds.agenthosts import host_runtimes, model_path, runnable
from reconciler.fleet.model.observed import FleetObservation
from reconciler.spec.fleet import Fleet

DRIVER = "reconciler.fleet.drivers.ssh:SshDriver"
ONE_JOB_PER_REPLICA = False
AGENTS_USER = None

__all__ = ["host_runtimes", "model_path", "runnable"]


def runs_here(fleet: Fleet) -> bool:
    return False


def view(fleet: Fleet, seen: FleetObservation) -> dict[str, Any] | None:
    return None
