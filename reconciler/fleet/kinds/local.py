"""Pure logic: the card of the `local` kind of fleet — hosts that are this machine, reached
without SSH, the agent a process of the bot's own user (reconciler.fleet.drivers.local).
Units run in the container or venv runtime, or as the simulator (agenthosts)."""

from __future__ import annotations

from reconciler.fleet.kinds.agenthosts import (
    AGENTS_USER,
    ONE_JOB_PER_REPLICA,
    host_runtimes,
    model_path,
    runnable,
    view,
)
from reconciler.spec.fleet import Fleet

DRIVER = "reconciler.fleet.drivers.local:LocalDriver"

__all__ = ["AGENTS_USER", "ONE_JOB_PER_REPLICA", "host_runtimes", "model_path", "runnable", "view"]


def runs_here(fleet: Fleet) -> bool:
    return True
