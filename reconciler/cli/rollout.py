"""CLI: `denv rollout status RELEASE` (per stage: revision, state, alarms, promotion) and
`denv rollback RELEASE/STAGE [--to REV]` (a rollback PR by hand, merged at once)."""

from __future__ import annotations

import getpass
import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from reconciler.cli import terminal
from reconciler.cli.common import JsonOption, console, print_json
from reconciler.cli.plan import LocationOption, cache_dir
from reconciler.errors import UsageError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.config import open_forge
from reconciler.reconcile.source import GitSource
from reconciler.rollout.alarms import duration_text
from reconciler.rollout.manual import manual_rollback
from reconciler.rollout.overview import release_stages
from reconciler.rollout.revisions import Revisions
from reconciler.rollout.status import StageStatus

app = typer.Typer(help="Stages of a release: bake, alarms, promotion and rollback.")


@app.command("status")
def status(
    release: Annotated[str, typer.Argument(help="The release, e.g. chat-8b.")],
    repo: LocationOption = ".",
    as_json: JsonOption = False,
) -> None:
    """Per stage: the revision git names and the one running, the state (deploying, baking
    12m/30m, green, waiting for approval, rolled back, rejected) and the alarms."""
    source = GitSource(repo, cache_dir(), branch="main")
    drivers = Drivers(warn=lambda m: print(f"warning: {m}", file=sys.stderr))
    try:
        with terminal.console(stderr=True).status("reading git and the bot's state"):
            _, head, rows, kept, why = release_stages(source, release, drivers)
    finally:
        drivers.close()
    now = time.time()
    checked_at = kept.checked_at if kept is not None else None
    if as_json:
        print_json(
            {
                "release": release,
                "head": head,
                "bot": why or "ok",
                "checked_at": checked_at,
                "stages": [r.model_dump(mode="json") for r in rows],
            }
        )
        return
    _print(rows)
    if why:
        console.print(f"bot: {why}", markup=False)
    elif checked_at is not None:  # a bot that stopped passing shows here
        console.print(f"bot: last pass {duration_text(max(0.0, now - checked_at))} ago")


def _print(rows: list[StageStatus]) -> None:
    table = Table("STAGE", "FLEETS", "REVISION", "RUNNING", "STATE", "ALARMS", box=None)
    for row in rows:
        alarms = "\n".join(f"{'FIRING ' if a.firing else ''}{a.name}: {a.text}" for a in row.alarms)
        table.add_row(
            row.stage,
            ",".join(row.fleets),
            (row.revision or "—")[:12],
            (row.running or "—")[:12],
            row.state,
            alarms or "—",
        )
    console.print(table)
    for row in rows:
        if row.promotion:
            console.print(f"{row.stage}: {row.promotion}", markup=False)
        if row.rollback_pr:
            console.print(f"{row.stage}: rollback recorded in PR #{row.rollback_pr}", markup=False)
        if row.note:
            console.print(f"{row.stage}: {row.note}", markup=False)
        for error in row.errors:
            console.print(f"{row.stage}: {error}", markup=False)


def rollback(
    where: Annotated[str, typer.Argument(help="RELEASE/STAGE, e.g. chat-8b/prod.")],
    to: Annotated[
        str | None, typer.Option("--to", help="The revision to return to (default: the last good).")
    ] = None,
    no_merge: Annotated[
        bool, typer.Option("--no-merge", help="Open the rollback PR only; merge it yourself.")
    ] = False,
    repo: LocationOption = ".",
    as_json: JsonOption = False,
) -> None:
    """Roll a stage back by hand: a PR that returns it to its last good revision (or --to)
    and rejects the current one, merged at once; the next reconcile pass runs it."""
    if where.count("/") != 1:
        raise UsageError(f"'{where}': expected RELEASE/STAGE, e.g. chat-8b/prod")
    source = GitSource(repo, cache_dir(), branch="main")
    user = os.environ.get("DENV_USER") or getpass.getuser()
    forge = open_forge(Path(source.git_dir), os.environ, user=user)
    done = manual_rollback(Revisions(source), forge, where, to, user, merge=not no_merge)
    if as_json:
        print_json(done.as_dict())
        return
    console.print(
        f"{where}: {done.bad[:12]} -> {done.target[:12]} in PR #{done.pr} ({done.url})",
        markup=False,
    )
    for effect in done.stages:
        console.print(f"  {effect.stage}: {effect.text}", markup=False)
    if done.merged:
        console.print("merged: the next reconcile pass runs it", markup=False)
    elif done.refused:
        console.print(f"not merged: {done.refused}; merge PR #{done.pr} to roll back", markup=False)
