"""Pure logic: the card of the `local` kind of fleet — hosts that are this machine, reached
without SSH, the agent a process of the bot's own user (reconciler.fleet.drivers.local).
Units run in the container or venv runtime, or as the simulator (agenthosts)."""

from __future__ import annotations

# An agent kind's card: the parts agenthosts shares (its __all__), its driver, runs_here.
from reconciler.fleet.kinds.agenthosts import *  # noqa: F403
from reconciler.spec.fleet import Fleet

DRIVER = "reconciler.fleet.drivers.local:LocalDriver"


def runs_here(fleet: Fleet) -> bool:
    return True
