"""CLI: `denv fleet …` — fleets, what their hosts report, unit logs, and repairing the
records an agent cannot read."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.table import Table

from reconciler.cli import fleet_trials
from reconciler.cli.common import (
    JsonOption,
    RepoOption,
    console,
    load,
    print_json,
    print_table,
    seconds,
)
from reconciler.cli.fleet_slurm import print_view
from reconciler.errors import DenvError, NotFound, UsageError
from reconciler.fleet.drivers.agent import AgentDriver
from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.kinds.cards import card_of
from reconciler.fleet.listing import fleet_row
from reconciler.fleet.model.observed import FleetObservation
from reconciler.spec.fleet import Fleet
from reconciler.spec.repo import Repo

app = typer.Typer(help="Fleets: hosts, GPUs and what runs there.", no_args_is_help=True)

app.command("trials")(fleet_trials.trials)

FleetArg = Annotated[str, typer.Argument(help="Fleet name (fleets/<name>.yaml).")]


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _fleet(repo: Repo, name: str) -> Fleet:
    if name not in repo.fleets:
        raise NotFound(f"unknown fleet '{name}' (known: {', '.join(sorted(repo.fleets))})")
    return repo.fleets[name]


def _observe(repo: Repo, fleet: Fleet, drivers: Drivers) -> FleetObservation:
    return drivers.get(fleet).observe(repo.resolve_hardware(fleet.hardware))


def _runs_here(fleet: Fleet) -> bool:
    """Its agent runs on this machine: a local fleet, a Slurm fleet without SSH (the bot runs
    on the login node). Asking it dials no host."""
    return card_of(fleet).runs_here(fleet)


@app.command("list")
def list_fleets(
    probe: Annotated[
        Literal["local", "all", "none"],
        typer.Option(
            help="Which fleets to ask for live figures: local ones (default; and Slurm fleets "
            "whose login node is this machine), all (connects to every SSH host), or none."
        ),
    ] = "local",
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Fleets with hardware, NVLink domain size, GPUs, free GPUs and running units; exit 1
    when a host asked for live figures did not answer (one line each says why)."""
    loaded = load(repo)
    drivers = Drivers(warn=_warn, one_shot=True)
    rows = []
    try:
        for name, fleet in sorted(loaded.fleets.items()):
            live = probe == "all" or (probe == "local" and _runs_here(fleet))
            seen = _observe(loaded, fleet, drivers) if live else None
            rows.append(fleet_row(loaded, name, fleet, seen))
    finally:
        drivers.close()
    if as_json:
        print_json({"fleets": rows})
    else:
        _print_fleets(rows)
    if any(row["errors"] for row in rows):
        raise typer.Exit(1)


def _print_fleets(rows: list[dict[str, Any]]) -> None:
    table = Table("FLEET", "PROVIDER", "HARDWARE", "DOMAIN", "GPUS", "FREE-GPUS", "UNITS", box=None)
    for row in rows:
        hardware = f"{row['hardware']} (simulated)" if row["simulated"] else row["hardware"]
        mark = "" if row["figures"] == "live" else "*"
        table.add_row(
            row["fleet"],
            row["provider"],
            hardware,
            str(row["domain"]),
            f"{row['gpus']}{mark}",
            f"{row['free_gpus']}{mark}",
            "…" if row["units"] is None else str(row["units"]),
        )
    console.print(table)
    console.print(
        "* declared in fleets/*.yaml, not observed (FREE-GPUS = GPUS − trial GPUs − "
        "what releases ask); live FREE-GPUS = unused GPUs − trial GPUs"
    )
    for row in rows:
        if row.get(row["transport"]) is not None:  # the kind's own part (a Slurm fleet's)
            print_view(row["transport"], row["fleet"], row[row["transport"]])
    for row in rows:
        for why in row["errors"].values():
            console.print(f"{row['fleet']}: {why}", markup=False, soft_wrap=True)


@app.command("probe")
def probe_fleet(fleet: FleetArg, repo: RepoOption = Path("."), as_json: JsonOption = False) -> None:
    """Ask every host of FLEET for its GPUs (NVML, amdsmi, nvidia-smi, or simulated) and units."""
    loaded = load(repo)
    spec = _fleet(loaded, fleet)
    drivers = Drivers(warn=_warn, one_shot=True)
    try:
        seen = _observe(loaded, spec, drivers)
    finally:
        drivers.close()
    view = card_of(spec).view(spec, seen)  # the kind's own part: a Slurm fleet's nodes, jobs
    if as_json:
        print_json(
            {
                "fleet": fleet,
                "hosts": {k: v.model_dump(mode="json") for k, v in sorted(seen.hosts.items())},
                "errors": seen.errors,
                "transport": spec.transport,
                **({spec.transport: view} if view is not None else {}),
            }
        )
    elif view is not None:  # the view shows the GPU hosts; here, the others' units
        print_view(spec.transport, fleet, view)
        _print_probe(seen, only={h.name for h in spec.hosts if h.gpus == 0})
    else:
        _print_probe(seen)
    if seen.errors:
        raise typer.Exit(1)


def _print_probe(seen: FleetObservation, only: set[str] | None = None) -> None:
    """GPUs and units of every host (of the hosts `only` names: on a Slurm fleet, the login
    node's units, the routers; its nodes' GPUs and jobs are in print_slurm's tables)."""
    gpus = Table(
        "HOST",
        "GPU",
        "NAME",
        "MEMORY-MIB",
        "USED-MIB",
        "PROCESSES",
        "DOMAIN",
        box=None,
        title=f"{seen.fleet}: GPUs",
        title_justify="left",
    )
    units = Table(
        "HOST",
        "UNIT",
        "ALIVE",
        "PID",
        "PORT",
        "GPUS",
        "RESTARTS",
        "EXIT",
        box=None,
        title=f"{seen.fleet}: units" + (f" on {', '.join(sorted(only))}" if only else ""),
        title_justify="left",
    )
    for host, found in sorted(seen.hosts.items()):
        if only is not None and host not in only:
            continue
        for gpu in found.gpus:
            gpus.add_row(
                host,
                str(gpu.index),
                gpu.name or "…",
                str(gpu.memory_total_mib),
                str(gpu.memory_used_mib),
                " ".join(str(p.pid) for p in gpu.processes),
                gpu.domain or "…",
            )
        for unit in found.units:
            units.add_row(
                host,
                unit.id,
                "yes" if unit.alive else "no",
                str(unit.pid),
                str(unit.port or "…"),
                ",".join(map(str, unit.gpus)),
                str(unit.restarts),
                "…" if unit.exit_code is None else str(unit.exit_code),
            )
    if only is None:
        print_table(gpus)
    print_table(units)
    for _, error in sorted(seen.errors.items()):
        console.print(error, markup=False, soft_wrap=True)


@app.command("logs")
def logs(
    fleet: FleetArg,
    unit: Annotated[str, typer.Argument(help="Unit id.")],
    tail: Annotated[int, typer.Option(help="Lines from the end.")] = 100,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """The last lines of a unit's log, from whichever host runs it."""
    loaded = load(repo)
    spec = _fleet(loaded, fleet)
    drivers = Drivers(warn=_warn, one_shot=True)
    try:
        seen = _observe(loaded, spec, drivers)
        host = next(
            (h for h, found in seen.hosts.items() if any(u.id == unit for u in found.units)), None
        )
        if host is None:
            raise NotFound(
                f"no unit '{unit}' on {fleet}"
                + (f" (not reached: {', '.join(sorted(seen.errors))})" if seen.errors else "")
            )
        answer = drivers.get(spec).logs(host, unit, tail)
    finally:
        drivers.close()
    if as_json:
        print_json({"fleet": fleet, "host": host, **answer})
        return
    for line in answer["lines"]:
        typer.echo(line)
    if answer.get("log_error"):
        print(f"{host}: {answer['log_error']}", file=sys.stderr)


@app.command("runtimes")
def runtimes(fleet: FleetArg, repo: RepoOption = Path("."), as_json: JsonOption = False) -> None:
    """What is ready on each host of FLEET: engine environments, images and weights."""
    loaded = load(repo)
    spec = _fleet(loaded, fleet)
    drivers = Drivers(warn=_warn, one_shot=True)
    found: dict[str, Any] = {}
    errors: dict[str, str] = {}
    try:
        for host in spec.hosts:
            try:
                found[host.name] = drivers.get(spec).runtimes(host.name)
            except DenvError as exc:
                errors[host.name] = str(exc)
    finally:
        drivers.close()
    if as_json:
        print_json({"fleet": fleet, "hosts": found, "errors": errors})
    else:
        _print_runtimes(fleet, found, errors)
    if errors:
        raise typer.Exit(1)


def _size(count: int | None) -> str:
    return "…" if count is None else f"{count / 1e9:.2f} GB"


def _print_runtimes(fleet: str, found: dict[str, Any], errors: dict[str, str]) -> None:
    table = Table("HOST", "KIND", "NAME", "SIZE", "IN-USE", box=None, title=f"{fleet}: runtimes")
    for host, answer in sorted(found.items()):
        for env in answer["runtimes"]:
            name = env["name"] + (f" ({env['digest']})" if env.get("digest") else "")
            table.add_row(host, env["kind"], name, _size(env["bytes"]), _yes(env["in_use"]))
        for cached in answer.get("weights", []):
            table.add_row(host, "weights", cached["source"], _size(cached.get("bytes")), "")
    console.print(table)
    if not any(a["runtimes"] or a.get("weights") for a in found.values()):
        console.print("nothing prepared yet (the reconciler prepares before it starts units)")
    for host, error in sorted(errors.items()):
        line = error if error.startswith(host) else f"{host}: {error}"
        console.print(line, markup=False, soft_wrap=True)


def _yes(value: bool) -> str:
    return "yes" if value else "no"


@app.command("repair")
def repair(
    fleet: FleetArg,
    host: Annotated[str | None, typer.Option(help="Only this host of FLEET.")] = None,
    grace: Annotated[
        str, typer.Option(help="How long a unit's processes get after SIGTERM, then SIGKILL.")
    ] = "10s",
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Mend the records FLEET's agents cannot read (garbled, truncated): a lease file is moved
    aside (the lease is free again; the note it kept is lost), a unit record too, once the
    processes that carry the unit's DENV_UNIT marker are stopped (the next pass starts the
    unit again from git). Each file is kept as <file>.unreadable-<UTC time>."""
    loaded = load(repo)
    spec = _fleet(loaded, fleet)
    wait = seconds("--grace", grace)
    hosts = [h.name for h in spec.hosts if host in (None, h.name)]
    if not hosts:
        raise NotFound(f"fleet {fleet} has no host {host}")
    drivers = Drivers(warn=_warn, one_shot=True)
    found: dict[str, Any] = {}
    errors: dict[str, str] = {}
    try:
        driver = drivers.get(spec)
        if not isinstance(driver, AgentDriver):
            raise UsageError(f"fleet {fleet} ({spec.transport}) keeps no agent records")
        for name in hosts:
            try:
                found[name] = driver.repair(name, wait).model_dump(mode="json")["repaired"]
            except DenvError as exc:
                errors[name] = str(exc)
    finally:
        drivers.close()
    if as_json:
        print_json({"fleet": fleet, "repaired": found, "errors": errors})
    else:
        for name, done in found.items():
            for line in repaired_lines(done) or ["every record reads; nothing to repair"]:
                console.print(f"{name}: {line}", markup=False, soft_wrap=True)
        for why in errors.values():
            console.print(why, markup=False, soft_wrap=True)
    if errors:
        raise typer.Exit(1)


def repaired_lines(done: list[dict[str, Any]]) -> list[str]:
    """What `repair` did on a host, a line per record."""
    lines = []
    for record in done:
        kind = "lease file" if record["record"] == "lease" else "unit record"
        line = f"{kind} {record['path']} moved to {record['moved_to']}"
        if record["record"] == "unit":
            pids = ", ".join(str(p) for p in record["stopped"]) or "none running"
            line += f"; its processes stopped first (DENV_UNIT={record['id']}: {pids})"
        lines.append(line)
    return lines
