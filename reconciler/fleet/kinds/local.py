"""Pure logic: the card of the `local` kind of fleet — hosts that are this machine, reached
without SSH, the agent a process of the bot's own user (reconciler.fleet.drivers.local).
Units run in the container or venv runtime, or as the simulator (agenthosts)."""

from __future__ import annotations

from typing import Any

from reconciler.fleet.kinds.agenthosts import host_runtimes, model_path, runnable
from reconciler.fleet.model.observed import FleetObservation
from reconciler.spec.fleet import Fleet

DRIVER = "reconciler.fleet.drivers.local:LocalDriver"
ONE_JOB_PER_REPLICA = False
AGENTS_USER = None

__all__ = ["host_runtimes", "model_path", "runnable"]


def runs_here(fleet: Fleet) -> bool:
    return True


def view(fleet: Fleet, seen: FleetObservation) -> dict[str, Any] | None:
    return None
