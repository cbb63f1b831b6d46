"""CLI: `denv fleet trials FLEET` — the trials on a fleet's GPUs, who owns them, and stopping
those whose owner is gone (or any, by id)."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from reconciler.cli import terminal
from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json
from reconciler.errors import DenvError, NotFound
from reconciler.fleet.drivers.registry import Drivers
from reconciler.spec.fleet import Fleet
from reconciler.trials.deployment import stop_trial
from reconciler.trials.owner import (
    FoundTrial,
    TrialState,
    found_trials,
    owner_state,
    state_words,
)

STOP_GRACE = 10.0  # seconds each unit gets to stop before SIGKILL, as a trial's teardown


def trials(
    fleet: Annotated[str, typer.Argument(help="Fleet name (fleets/<name>.yaml).")],
    stop: Annotated[
        list[str] | None,
        typer.Option("--stop", help="Stop this trial's units, router first (repeatable)."),
    ] = None,
    stop_abandoned: Annotated[
        bool,
        typer.Option(
            "--stop-abandoned", help="Stop every trial whose owning process here is gone."
        ),
    ] = False,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Trials (bench runs, parity checks, optimizer trials) on FLEET's GPUs: purpose, recipe,
    GPUs, start, owning process and state — running, abandoned (its owner is gone: nothing
    will stop it), or owner elsewhere (another machine's process; this one cannot tell)."""
    loaded = load(repo)
    spec = loaded.fleets.get(fleet)
    if spec is None:
        raise NotFound(f"unknown fleet '{fleet}' (known: {', '.join(sorted(loaded.fleets))})")
    messages = terminal.console(stderr=True)

    def say(message: str) -> None:
        messages.print(message, markup=False, highlight=False, soft_wrap=True)

    drivers = Drivers(warn=lambda m: print(f"warning: {m}", file=sys.stderr))
    try:
        hardware = loaded.resolve_hardware(spec.hardware)
        seen = drivers.get(spec).observe(hardware)
        found = found_trials(seen, owner_state)
        chosen = _chosen(found, stop or [], stop_abandoned, fleet)
        with messages.status(f"stopping {len(chosen)} trial(s)…") if chosen else nullcontext():
            stopped, left = _stop(spec, drivers, chosen, say)
    finally:
        drivers.close()
    if as_json:
        print_json(
            {
                "fleet": fleet,
                "trials": [_row(t) for t in found],
                "stopped": stopped,
                "not_stopped": left,
                "errors": seen.errors,
            }
        )
    elif not chosen:
        _print(fleet, found)
    for host, why in sorted(seen.errors.items()):
        say(f"{host} not reached, its trials are not listed: {why}")
    if left:
        raise DenvError("trial units left running: " + "; ".join(left))
    if seen.errors:
        raise typer.Exit(1)


def _chosen(
    found: list[FoundTrial], ids: list[str], abandoned: bool, fleet: str
) -> list[FoundTrial]:
    """The trials to stop; NotFound naming each unknown id (nothing stopped then)."""
    known = {t.trial: t for t in found}
    unknown = [i for i in ids if i not in known]
    if unknown:
        there = ", ".join(known) or "none"
        raise NotFound(f"no trial {', '.join(unknown)} on {fleet} (trials there: {there})")
    return [t for t in found if t.trial in ids or (abandoned and t.state == TrialState.ABANDONED)]


def _stop(
    fleet: Fleet, drivers: Drivers, chosen: list[FoundTrial], say: Callable[[str], None]
) -> tuple[list[str], list[str]]:
    """Stop each chosen trial; the ids of those stopped whole, and the units left, why."""
    stopped: list[str] = []
    left: list[str] = []
    for trial in chosen:
        not_stopped = stop_trial(fleet, drivers, trial, STOP_GRACE)
        if not_stopped:
            left.extend(not_stopped)
            continue
        stopped.append(trial.trial)
        say(f"- stopped trial {trial.trial}: GPUs freed: {trial.gpus_text()}")
    return stopped, left


def _row(trial: FoundTrial) -> dict[str, object]:
    return {**trial.model_dump(mode="json"), "gpus": trial.gpus}


def _started(at: float | None) -> str:
    if at is None:
        return "…"
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _print(fleet: str, found: list[FoundTrial]) -> None:
    if not found:
        console.print(f"no trials on {fleet}")
        return
    table = Table(
        "TRIAL", "PURPOSE", "RECIPE", "GPUS", "UNITS", "STARTED", "OWNER", "STATE", box=None
    )
    for trial in found:
        running = sum(u.alive for u in trial.units)
        table.add_row(
            trial.trial,
            trial.purpose or "…",
            trial.recipe or "…",
            trial.gpus_text(),
            f"{running}/{len(trial.units)} running",
            _started(trial.started_at),
            trial.owner or "…",
            state_words(trial.state),
        )
    console.print(table)
    if any(t.state == TrialState.ABANDONED for t in found):
        console.print(f"stop abandoned trials with: denv fleet trials {fleet} --stop-abandoned")
