"""Pure logic: the card of the `slurm` kind of fleet — the nodes of a Slurm cluster, where a
replica runs as one batch job over its nodes that the agent on the login node submits and
watches (reconciler.fleet.drivers.slurm). The job's command is the unit as the container or
venv runtime runs it (agenthosts); the driver writes the job around it. Jobs run as the user
who submits them: the agent's."""

from __future__ import annotations

from typing import Any

from reconciler.fleet.kinds.agenthosts import host_runtimes, model_path, runnable
from reconciler.fleet.listing import slurm_view
from reconciler.fleet.model.observed import FleetObservation
from reconciler.spec.fleet import Fleet

DRIVER = "reconciler.fleet.drivers.slurm:SlurmDriver"
ONE_JOB_PER_REPLICA = True
AGENTS_USER = "Slurm jobs of the agent's user"

__all__ = ["host_runtimes", "model_path", "runnable"]


def view(fleet: Fleet, seen: FleetObservation) -> dict[str, Any] | None:
    """The login node, every node and denv's jobs (reconciler.fleet.listing.slurm_view)."""
    return slurm_view(fleet, seen)
