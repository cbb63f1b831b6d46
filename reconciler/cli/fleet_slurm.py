"""CLI: how a Slurm fleet looks in `denv fleet list` and `fleet probe` — its login node, each
node's scheduler state and free GPUs, and denv's jobs in the queue, as the slurm card's
`view` gathers them (the UI's fleets page shows the same); this only prints it. A kind whose
card has a view and no printer here shows it in --json only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.table import Table

from reconciler.cli.common import console


def print_view(kind: str, fleet: str, view: dict[str, Any]) -> None:
    """The kind's own part of a fleet's status, as a table where a printer knows it."""
    printer = PRINTERS.get(kind)
    if printer is not None:
        printer(fleet, view)


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
        nodes.add_row(row["node"], state, _count(row["gpus"]), _count(row["free_gpus"]))
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
            job["reason"] or "",
            ",".join(job["nodes"]),
            job["partition"] or "…",
        )
    console.print(nodes)
    console.print(queue if view["queue"] else f"{fleet}: no jobs of denv in the queue")


def _count(value: int | None) -> str:
    return "…" if value is None else str(value)


PRINTERS: dict[str, Callable[[str, dict[str, Any]], None]] = {"slurm": print_slurm}
