"""Pure logic: the card of the `slurm` kind of fleet — the nodes of a Slurm cluster, where a
replica runs as one batch job over its nodes that the agent on the login node submits and
watches (reconciler.fleet.drivers.slurm). The job's command is the unit as the container or
venv runtime runs it (agenthosts); the driver writes the job around it. Jobs run as the user
who submits them: the agent's."""

from __future__ import annotations

from typing import Any

from reconciler.engines.units import Unit
from reconciler.fleet.kinds.agenthosts import host_runtimes, model_path, runnable
from reconciler.fleet.kinds.cards import JobLine
from reconciler.fleet.model.observed import FleetObservation, UnitRecord
from reconciler.fleet.model.slurmjob import job_request, sbatch_line
from reconciler.spec.fleet import Fleet
from reconciler.spec.kindsettings import SlurmSettings

DRIVER = "reconciler.fleet.drivers.slurm:SlurmDriver"
ONE_JOB_PER_REPLICA = True
AGENTS_USER = "Slurm jobs of the agent's user"

__all__ = ["host_runtimes", "model_path", "runnable"]


def jobs(fleet: Fleet, units: list[Unit], trial: bool) -> dict[str, JobLine]:
    """unit name -> the sbatch line of its job: one job per replica, over its nodes (node 0's
    unit names it); the login node's units (routers) run as processes."""
    settings = fleet.settings(SlurmSettings)
    assert settings is not None  # the fleet model requires it for slurm
    login = next((host.name for host in fleet.hosts if host.gpus == 0), None)
    nodes: dict[tuple[str, int], list[str]] = {}
    for unit in sorted(units, key=lambda u: u.node):
        nodes.setdefault((unit.role, unit.replica), []).append(unit.host)
    found = {}
    for unit in units:
        if unit.host != login and unit.node == 0:
            request = job_request(settings, nodes[(unit.role, unit.replica)], trial)
            argv = sbatch_line(request, unit.name, len(unit.gpu_indices))
            note = "" if "--time" in argv else "time limit: the partition's default"
            found[unit.name] = JobLine("sbatch", argv, note)
    return found


def runs_here(fleet: Fleet) -> bool:
    return fleet.ssh is None  # the bot runs on the login node


def view(fleet: Fleet, seen: FleetObservation) -> dict[str, Any] | None:
    """`slurm_view`, with the GPUs that take work (`free_gpus`, for the fleet's figures)."""
    found = slurm_view(fleet, seen)
    return {**found, "free_gpus": slurm_free_gpus(found)}


def slurm_view(fleet: Fleet, seen: FleetObservation) -> dict[str, Any]:
    """The login node (reached or why not, its units: the routers), every node (scheduler
    state, cordoned and why, GPUs, GPUs no job holds) and denv's jobs, oldest unit first."""
    login = next(host.name for host in fleet.hosts if host.gpus == 0)
    jobs = [record for name, found in seen.hosts.items() if name != login for record in found.units]
    held: dict[str, set[int]] = {}  # node -> GPUs denv's running jobs hold there
    for record in jobs:
        for node in record.nodes if record.alive else ():
            held.setdefault(node, set()).update(record.gpus)
    nodes = []
    for host in fleet.hosts:
        if host.name == login:
            continue
        found = seen.hosts.get(host.name)
        row: dict[str, Any] = {
            "node": host.name,
            "state": None,
            "cordoned": None,
            "gpus": None,
            "free_gpus": None,
            "error": seen.errors.get(host.name),
        }
        if found is not None:
            foreign = {gpu.index for gpu in found.gpus if gpu.processes}
            taken = foreign | held.get(host.name, set())
            row.update(
                state=found.scheduler_state,
                cordoned=found.cordoned,
                gpus=len(found.gpus),
                free_gpus=sum(1 for gpu in found.gpus if gpu.index not in taken),
            )
        nodes.append(row)
    head = seen.hosts.get(login)
    return {
        "login": {
            "host": login,
            "reached": head is not None,
            "units": [u.id for u in head.units if u.alive] if head is not None else [],
            "error": seen.errors.get(login),
        },
        "nodes": nodes,
        "queue": [_job(record) for record in sorted(jobs, key=lambda r: (r.id, r.job or ""))],
    }


def _job(record: UnitRecord) -> dict[str, Any]:
    return {
        "unit": record.id,
        "job": record.job,
        "state": record.queue,
        "reason": record.queue_reason,
        "nodes": list(record.nodes),
        "partition": record.partition,
    }


def slurm_free_gpus(view: dict[str, Any]) -> int:
    """GPUs no job holds on the nodes that take work (cordoned ones do not)."""
    return sum(row["free_gpus"] or 0 for row in view["nodes"] if not row["cordoned"])
