"""Pure logic: the card of the `ssh` kind of fleet — hosts reached over SSH, where denv's
agent runs each unit as a process of its own (reconciler.fleet.drivers.ssh). Units run in the
container or venv runtime, or as the simulator (agenthosts)."""

from __future__ import annotations

# An agent kind's card: the parts agenthosts shares (its __all__), its driver, runs_here.
from reconciler.fleet.kinds.agenthosts import *  # noqa: F403
from reconciler.spec.fleet import Fleet

DRIVER = "reconciler.fleet.drivers.ssh:SshDriver"


def runs_here(fleet: Fleet) -> bool:
    return False
