"""Pure logic: the card of the `ssh` kind of fleet — hosts reached over SSH, where denv's
agent runs each unit as a process of its own (reconciler.fleet.drivers.ssh). Units run in the
container or venv runtime, or as the simulator (agenthosts)."""

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

DRIVER = "reconciler.fleet.drivers.ssh:SshDriver"

__all__ = ["AGENTS_USER", "ONE_JOB_PER_REPLICA", "host_runtimes", "model_path", "runnable", "view"]


def runs_here(fleet: Fleet) -> bool:
    return False
