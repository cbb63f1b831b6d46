"""CLI: `denv reconcile` (the bot: make the fleets match git, once or in a loop) and `denv
status` (per release, stage and fleet: what should run, what runs, ready, drift — planned as
the bot plans, with the rollback overrides it keeps)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
from prometheus_client import start_http_server
from rich.console import Console
from rich.table import Table

from reconciler.cli.common import JsonOption, console, print_json, seconds
from reconciler.cli.plan import LocationOption, cache_dir
from reconciler.cli.progress import ProgressSink
from reconciler.errors import DenvError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.config import open_forge
from reconciler.reconcile import probes
from reconciler.reconcile.apply import ApplyOptions
from reconciler.reconcile.loop import LEASE, BotMetrics, PassResult, Reconciler, planned_fleets
from reconciler.reconcile.plan import ActionKind
from reconciler.reconcile.reach import FleetReach, Streaks, dump, earliest, parse, track
from reconciler.reconcile.render import queued as queued_action
from reconciler.reconcile.revisions import Stages
from reconciler.reconcile.snapshot import Snapshot, snapshot
from reconciler.reconcile.source import GitSource
from reconciler.rollout.hooks import bot_hooks
from reconciler.rollout.kept import bot_checks, release_fleets
from reconciler.rollout.revisions import Revisions, adjust_stages
from reconciler.rollout.state import RolloutState
from reconciler.rollout.status import Override, overrides


def reconcile(
    repo: LocationOption = ".",
    once: Annotated[bool, typer.Option("--once", help="One pass, then exit.")] = False,
    interval: Annotated[str, typer.Option(help="Time between passes, e.g. 30s, 2m.")] = "30s",
    ready_timeout: Annotated[
        str, typer.Option(help="How long a new replica may take to become ready.")
    ] = "15m",
    drain: Annotated[str, typer.Option(help="Grace for in-flight requests of a replica.")] = "30s",
    crash_backoff: Annotated[
        str,
        typer.Option(
            help="Wait before the second restart of a unit that keeps exiting; doubled at "
            "each later one, up to 5m (the first restart is at once)."
        ),
    ] = "10s",
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve the bot's Prometheus metrics on this port.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Make the fleets run what git says: read, observe, plan, apply — level-triggered. On
    SIGTERM every wait ends within seconds, no other action starts, and the bot exits 0;
    the next pass resumes what was left (a prepare job goes on on its host)."""
    options = ApplyOptions(
        ready_timeout=seconds("--ready-timeout", ready_timeout),
        drain_grace=seconds("--drain", drain),
        backoff_base=seconds("--crash-backoff", crash_backoff),
    )
    every = seconds("--interval", interval)
    out = Console(stderr=True)
    metrics = BotMetrics()
    if metrics_port is not None:
        start_http_server(metrics_port, registry=metrics.registry)
    source = GitSource(repo, cache_dir(), branch="main")

    # lines only, no bars: the passes' summaries go to stdout between them
    say = ProgressSink(out, live=False).say

    # the forge is opened at the first pull request the rollout needs, in the bot's clone
    checks, adjust = bot_hooks(source, lambda: open_forge(Path(source.git_dir), os.environ), say)
    bot = Reconciler(source, options, say=say, metrics=metrics, checks=checks, adjust=adjust)

    def finish(signum: int, frame: FrameType | None) -> None:
        out.print("SIGTERM: stopping after the current step; the next pass resumes", markup=False)
        bot.stop_requested.set()

    previous = signal.signal(signal.SIGTERM, finish)
    passes: list[PassResult] = []

    def shown(result: PassResult) -> None:
        passes.append(result)
        if as_json:
            print_json(_pass_json(result))
        else:
            console.print(
                time.strftime("%H:%M:%S ") + result.summary(), markup=False, soft_wrap=True
            )
            for error in result.report.errors[1:]:
                console.print(f"  error: {error}", markup=False)

    try:
        errors = bot.loop(every, once, shown)
    finally:
        signal.signal(signal.SIGTERM, previous)
        bot.close()
    if once and errors:
        raise typer.Exit(1)


def _pass_json(result: PassResult) -> dict[str, Any]:
    return {
        "head": result.head,
        "planned": result.plan.counts,
        "done": dict(result.report.done),
        "errors": result.report.errors,
        "waiting": result.report.waiting,
        "resubmitted": result.report.resubmitted,
        "seconds": round(result.seconds, 3),
    }


def status(repo: LocationOption = ".", as_json: JsonOption = False) -> None:
    """Per release, stage and fleet: desired and running revision, replicas ready/desired,
    endpoint, drift and the bot's last error."""
    drivers = Drivers(warn=lambda m: print(f"warning: {m}", file=sys.stderr))
    source = GitSource(repo, cache_dir(), branch="main")
    rolled: list[Override] = []

    def as_the_bot_runs(stages: Stages) -> Stages:
        """The bot's `adjust` hook with the state it keeps: a rollback override in force
        shows as what runs, not as drift."""
        loaded = source.repo_at(stages.head)
        checks, _ = bot_checks(loaded, release_fleets(loaded), drivers)
        if not checks:
            return stages
        adjusted = adjust_stages(Revisions(source), stages, checks)
        state = RolloutState.model_validate(checks.get("rollout") or {})
        rolled.extend(overrides(stages, adjusted, state))
        return adjusted

    try:
        with Console(stderr=True).status("observing"):
            snap = snapshot(source, drivers, adjust=as_the_bot_runs)
            notes = _notes(snap, drivers)
    finally:
        drivers.close()
    now = time.time()
    reach = _reach(snap, notes, source.label, now)
    rows = _rows(snap, reach)
    if as_json:
        checks = {k: v for n in notes.values() for k, v in parity_of(n).items()}
        print_json(
            {
                "head": snap.head,
                "deployments": rows,
                "bot": notes,
                "parity": checks,
                "overrides": [o.model_dump(mode="json") for o in rolled],
                "unreachable": {
                    fleet: {
                        "whole": r.whole,
                        "since": r.since,
                        "hosts": {h: u.model_dump() for h, u in r.unreached.items()},
                    }
                    for fleet, r in reach.items()
                },
            }
        )
        return
    table = Table(
        "RELEASE", "STAGE", "FLEET", "DESIRED", "RUNNING", "READY", "ENDPOINT", "DRIFT", box=None
    )
    for row in rows:
        table.add_row(
            row["release"],
            row["stage"],
            row["fleet"],
            (row["desired_revision"] or "—")[:12],
            ",".join(r[:12] for r in row["running_revisions"]) or "—",
            "?" if row["ready"] is None else f"{row['ready']}/{row['replicas']}",
            row["endpoint"] or "—",
            _drift_text(row),
        )
    console.print(table)
    for found in reach.values():
        console.print(found.text(now), markup=False)
    for row in rows:
        if row["error"]:
            console.print(f"{row['release']}/{row['stage']} on {row['fleet']}: {row['error']}")
        for unit, why in sorted(row["queued"].items()):
            console.print(f"{unit} on {row['fleet']}: pending in the queue ({why})", markup=False)
    for override in rolled:
        console.print(override.text(), markup=False)
    shown: set[str] = set()
    for note in notes.values():
        for key, found in sorted(parity_of(note).items()):
            if key not in shown:
                shown.add(key)
                console.print(_parity_line(key, found), markup=False)
    for fleet, note in sorted(notes.items()):
        if note is None:
            console.print(f"{fleet}: no reconciler has run here yet", markup=False)
            continue
        if "error" in note:
            if fleet not in reach:  # else the line above says why
                console.print(
                    f"{fleet}: the bot's note was not read: {note['error']}", markup=False
                )
            continue
        age = now - note["at"]
        console.print(f"{fleet}: last pass {age:.0f}s ago: {note['summary']}", markup=False)


def parity_of(note: dict[str, Any] | None) -> dict[str, Any]:
    """'release/stage' -> deploy-time parity, from a bot's note."""
    found: dict[str, Any] = ((note or {}).get("checks") or {}).get("parity") or {}
    return found


def _parity_line(key: str, found: dict[str, Any]) -> str:
    """One stage's deploy-time parity, as `denv status` shows it."""
    if found["state"] == "waiting":
        return f"{key}: parity waits until every fleet of the stage is ready"
    if found["state"] == "error":
        return f"{key}: DEGRADED: parity could not run: {found['error']}"
    line = f"{key}: {found['verdict']} against {found['reference']}"
    if found["degraded"]:
        line = f"{key}: DEGRADED (no promotion): {found['verdict']}; failing: " + ", ".join(
            found["failing"]
        )
    return line


def _drift_text(row: dict[str, Any]) -> str:
    if row["drift"] is None:
        return "unknown: unreachable"
    drift = row["drift"] or "none"
    down = len(row["unreachable_hosts"])
    return drift + (f" ({down} host{'s' * (down > 1)} unreachable)" if down else "")


def _rows(snap: Snapshot, reach: dict[str, FleetReach]) -> list[dict[str, Any]]:
    """One row per release, stage and fleet; on a fleet none of whose hosts answered, ready
    and drift are None (not known), with `unreachable_since`."""
    rows = []
    deployments = {(d.release, d.stage, d.fleet): d for d in snap.desired.deployments}
    for group in snap.plan.groups:
        actions = snap.plan.group_actions(group)
        wanted = deployments.get((group.release, group.stage, group.fleet))
        replicas = ready = 0
        if wanted is not None:
            heads = [u for u in wanted.units if u.unit.role != "router" and u.unit.port]
            running = {a.unit for a in actions if a.kind == ActionKind.KEEP}
            replicas = len(heads)
            ready = sum(1 for u in heads if u.id in running and probes.is_ready(u.unit))
        drift = Counter(a.kind.value for a in actions if a.kind != ActionKind.KEEP)
        if queued := [a for a in actions if queued_action(a)]:
            drift["pending"] = len(queued)  # not there yet: the scheduler holds the job
        found = reach.get(group.fleet)
        whole = found is not None and found.whole
        rows.append(
            {
                "release": group.release,
                "stage": group.stage,
                "fleet": group.fleet,
                "desired_revision": group.revision,
                "running_revisions": list(group.running_revisions),
                "replicas": replicas,
                "ready": None if whole else ready,
                "endpoint": group.endpoint,
                "drift": None
                if whole
                else ", ".join(f"{kind} {count}" for kind, count in sorted(drift.items())),
                "error": group.error,
                # jobs the scheduler has not started (a Slurm fleet), with its reason
                "queued": {a.unit: a.reason.removeprefix("pending: ") for a in queued},
                "unreachable_hosts": sorted(found.unreached) if found is not None else [],
                "unreachable_since": found.since if whole and found is not None else None,
            }
        )
    return rows


def _notes(snap: Snapshot, drivers: Drivers) -> dict[str, Any]:
    """The last pass the bot recorded with each fleet's lease."""
    notes: dict[str, Any] = {}
    for fleet in planned_fleets(snap):
        spec = snap.repo.fleets[fleet]
        driver = drivers.get(spec)
        try:
            notes[fleet] = driver.lease(LEASE, "status", 0, peek=True).get("note")
        except DenvError as exc:
            notes[fleet] = {"error": str(exc)}  # not a pass: the note is not known
    return notes


def _reach(snap: Snapshot, notes: dict[str, Any], label: str, now: float) -> dict[str, FleetReach]:
    """The fleets with hosts that did not answer this look, each host since the first failed
    observation of its streak: the earliest the bot's notes (from the fleets that answered)
    or this machine's earlier `denv status` runs recorded. This machine's record is kept in
    the state folder, per repository."""
    path = _reach_file()
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        kept = {}
    kept = kept if isinstance(kept, dict) else {}
    mine = track(parse(kept.get(label)), snap.unreached(), snap.observations, now)
    noted: list[Streaks] = [parse((n or {}).get("unreachable")) for n in notes.values()]
    merged = earliest(mine, *noted)
    wanted = {k: v for k, v in kept.items() if k != label} | (
        {label: dump(merged)} if merged else {}
    )
    if wanted != kept:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(wanted, indent=2) + "\n")
        except OSError:
            pass  # a read-only home: the streak starts again at the next look
    return {
        fleet: FleetReach(fleet=fleet, hosts=len(snap.repo.fleets[fleet].hosts), unreached=hosts)
        for fleet, hosts in merged.items()
        if fleet in snap.repo.fleets
    }


def _reach_file() -> Path:
    """This machine's record of hosts `denv status` found unreachable, and since when."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "denv" / "unreachable.json"
