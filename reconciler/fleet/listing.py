"""Pure logic: a fleet as `denv fleet list`, `fleet probe` and the UI's fleets page show it —
its figures (GPUs, free GPUs, units; declared or live), its kind's own part (its card's
`view`: a Slurm fleet's login node, nodes and queue), and each host's GPUs (used, free, kept
for trials) and units in words.

A fleet and what was observed in (None: not observed), plain data out; printers render it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconciler.catalog.deployments import declared_free_gpus
from reconciler.fleet.kinds.cards import card_of
from reconciler.fleet.model.labels import record_key
from reconciler.fleet.model.observed import FleetObservation, UnitRecord
from reconciler.fleet.placement.gpus import trial_gpus
from reconciler.fleet.placement.placer import host_states
from reconciler.spec.checks import domain_size
from reconciler.spec.fleet import Fleet
from reconciler.spec.repo import Repo


def fleet_row(repo: Repo, name: str, fleet: Fleet, seen: FleetObservation | None) -> dict[str, Any]:
    """`denv fleet list`'s row: declared figures, live ones where the fleet was observed."""
    row: dict[str, Any] = {
        "fleet": name,
        "provider": fleet.provider,
        "hardware": fleet.hardware,
        "domain": domain_size(repo, name),
        "simulated": fleet.simulated,
        "hosts": len(fleet.hosts),
        "trial_gpus": fleet.trial_gpus,
        "gpus": fleet.gpus,
        "free_gpus": declared_free_gpus(repo, name),
        "units": None,
        "figures": "declared",
        "unreachable": [],
        "errors": {},  # host -> why it was not reached
        "transport": fleet.transport,
    }
    if seen is None:
        return row
    row["unreachable"] = sorted(seen.errors)
    row["errors"] = dict(sorted(seen.errors.items()))
    if not seen.hosts:
        return row  # every host unreachable: the declared figures stand, marked so
    unused = sum(len(seen.free_gpus(host)) for host in seen.hosts)
    view = card_of(fleet).view(fleet, seen)
    if view is not None:  # under the kind's name: a Slurm fleet's nodes and queue
        row[fleet.transport] = view
        unused = view.get("free_gpus", unused)  # a job over several nodes holds GPUs on each
    row.update(
        {
            "gpus": sum(len(h.gpus) for h in seen.hosts.values()),
            "free_gpus": max(unused - fleet.trial_gpus, 0),
            "units": sum(1 for h in seen.hosts.values() for u in h.units if u.alive),
            "figures": "live" if not seen.errors else "partly live",
        }
    )
    return row


# -- hosts and units --------------------------------------------------------------------------


@dataclass
class HostRow:
    """One host: as declared, and as it answered (or why it did not)."""

    name: str
    declared_gpus: int
    answered: bool
    error: str | None = None  # why it was not reached
    cause: str | None = None  # that, in a word or two (Cause)
    gpus: list[int] = field(default_factory=list)  # indices present
    used: list[int] = field(default_factory=list)  # held by denv's units or foreign processes
    free: list[int] = field(default_factory=list)  # neither used nor kept for trials
    trial: list[int] = field(default_factory=list)  # kept for bench runs and optimizer trials
    scheduler_state: str | None = None  # a Slurm node's: idle, mixed, drained, …
    cordoned: str | None = None  # why it takes nothing new


def host_rows(fleet: Fleet, seen: FleetObservation | None) -> list[HostRow]:
    """Every host of the fleet file, in its order; GPUs only for those that answered. A job
    over several nodes (a Slurm job, a multi-node replica) holds its GPUs on each node."""
    if seen is None:
        return [HostRow(h.name, h.gpus, answered=False) for h in fleet.hosts]
    kept = trial_gpus(fleet, host_states(fleet, seen, keeps=lambda key: True))
    held: dict[str, set[int]] = {}
    for name, reported in seen.hosts.items():
        for record in reported.units:
            for node in (record.nodes or (name,)) if record.alive else ():
                held.setdefault(node, set()).update(record.gpus)
    rows = []
    for host in fleet.hosts:
        found = seen.hosts.get(host.name)
        if found is None:
            cause = seen.causes.get(host.name)
            rows.append(
                HostRow(
                    host.name,
                    host.gpus,
                    answered=False,
                    error=seen.errors.get(host.name, "not observed"),
                    cause=str(cause) if cause is not None else None,
                )
            )
            continue
        used = held.get(host.name, set()) | {g.index for g in found.gpus if g.processes}
        trial = kept.get(host.name, set())
        present = [g.index for g in found.gpus]
        rows.append(
            HostRow(
                host.name,
                host.gpus,
                answered=True,
                gpus=present,
                used=sorted(used),
                free=[i for i in present if i not in used and i not in trial],
                trial=sorted(trial),
                scheduler_state=found.scheduler_state,
                cordoned=found.cordoned,
            )
        )
    return rows


@dataclass
class UnitRow:
    """One unit an agent reports, in words: its state and what it serves (from its labels)."""

    id: str
    host: str
    state: str  # ready, starting, running, pending, exited, or the queue's state
    reason: str = ""  # why pending, or how it ended
    release: str | None = None
    stage: str | None = None
    revision: str | None = None
    role: str | None = None
    trial: str | None = None  # the trial it belongs to (a bench run, an optimizer trial)
    gpus: list[int] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    port: int | None = None
    restarts: int = 0


def unit_state(record: UnitRecord, readiness: dict[str, bool]) -> tuple[str, str]:
    """A unit's state and why: `pending` in the scheduler's queue (its reason), `exited`
    (its code), and alive ones `ready` or `starting` where the look probed their readiness
    (`readiness`: unit id -> ready), else `running`."""
    if record.pending:
        return "pending", record.queue_reason or ""
    if not record.alive:
        if record.queue and record.queue != "RUNNING":
            return record.queue.lower(), record.queue_reason or ""
        code = "" if record.exit_code is None else f"exit code {record.exit_code}"
        return "exited", code
    ready = readiness.get(record.id)
    if ready is None:
        return "running", ""
    return ("ready", "") if ready else ("starting", "not ready yet")


def unit_rows(seen: FleetObservation, readiness: dict[str, bool]) -> list[UnitRow]:
    """The units of every host that answered, by host and id."""
    rows = []
    for host, found in sorted(seen.hosts.items()):
        for record in sorted(found.units, key=lambda r: r.id):
            state, reason = unit_state(record, readiness)
            labels = record.labels
            release = record_key(record)
            rows.append(
                UnitRow(
                    record.id,
                    host,
                    state,
                    reason,
                    release=release[0] if release else None,
                    stage=release[1] if release else None,
                    revision=labels.get("revision"),
                    role=labels.get("role"),
                    trial=labels.get("trial") if release is None else None,
                    gpus=list(record.gpus),
                    nodes=list(record.nodes),
                    port=record.port,
                    restarts=record.restarts,
                )
            )
    return rows
