"""CLI: how a Slurm fleet looks in `denv fleet list` and `fleet probe` — its login node, each
node's scheduler state and free GPUs, and denv's jobs in the queue. `slurm_view` is pure (a
fleet and what was observed in, plain data out); the printers only render it."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from reconciler.cli.common import console
from reconciler.fleet.model.observed import FleetObservation, UnitRecord
from reconciler.spec.fleet import Fleet


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


def free_gpus(view: dict[str, Any]) -> int:
    """GPUs no job holds on the nodes that take work (cordoned ones do not)."""
    return sum(row["free_gpus"] or 0 for row in view["nodes"] if not row["cordoned"])


def print_slurm(fleet: str, view: dict[str, Any]) -> None:
    login = view["login"]
    nodes = Table(
        "NODE",
        "STATE",
        "GPUS",
        "FREE-GPUS",
        box=None,
        title=f"{fleet}: nodes",
        title_justify="left",
    )
    routers = ", ".join(login["units"]) or "no units"
    reached = f"login node: agent, {routers}" if login["reached"] else "login node: not reached"
    nodes.add_row(login["host"], reached, "0", "-")
    for row in view["nodes"]:
        state = row["state"] or "not reached"
        if row["cordoned"]:  # the scheduler's state and its reason
            state = f"cordoned: {row['cordoned']}"
        nodes.add_row(row["node"], escape(state), _count(row["gpus"]), _count(row["free_gpus"]))
    queue = Table(
        "UNIT",
        "JOB",
        "STATE",
        "REASON",
        "NODES",
        "PARTITION",
        box=None,
        title=f"{fleet}: denv's jobs",
        title_justify="left",
    )
    for job in view["queue"]:
        queue.add_row(
            job["unit"],
            job["job"] or "…",
            job["state"] or "…",
            escape(job["reason"] or ""),
            ",".join(job["nodes"]),
            job["partition"] or "…",
        )
    console.print(nodes)
    console.print(queue if view["queue"] else f"{fleet}: no jobs of denv in the queue")


def _count(value: int | None) -> str:
    return "…" if value is None else str(value)
