"""CLI: `denv reconcile` (the bot: make the fleets match git, once or in a loop) and `denv
status` (per release, stage and fleet: what should run, what runs, ready, drift — planned as
the bot plans, with the rollback overrides and the elastic stages' counts it keeps; with
`--events`, every scaling decision the bots recorded)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from prometheus_client import start_http_server
from rich.console import Console
from rich.table import Table

from reconciler.cli import terminal
from reconciler.cli.common import JsonOption, console, print_json, print_table, seconds
from reconciler.cli.plan import LocationOption, cache_dir
from reconciler.cli.progress import ProgressSink
from reconciler.errors import UsageError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.config import open_forge
from reconciler.reconcile.apply import ApplyOptions
from reconciler.reconcile.loop import BotMetrics, PassResult, Reconciler
from reconciler.reconcile.source import GitSource
from reconciler.rollout.hooks import bot_hooks
from reconciler.rollout.overview import (
    drift_text,
    look,
    ready_text,
    scaling_history,
    status_lines,
)
from reconciler.rollout.scaled import event_line

if TYPE_CHECKING:
    from reconciler.cli.ui import Beside


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
    lease_ttl: Annotated[
        str,
        typer.Option(
            help="How long a fleet's lease lasts unrenewed (renewed every third of it): "
            "another bot takes over that long after this one stops."
        ),
    ] = "60s",
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve the bot's Prometheus metrics on this port.")
    ] = None,
    ui: Annotated[
        str | None,
        typer.Option(
            "--ui",
            help="Serve the read-only web UI too, on HOST:PORT (as `denv ui --listen`).",
        ),
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
    out = terminal.console(stderr=True)
    ttl = seconds("--lease-ttl", lease_ttl)
    if ttl < 1:
        raise UsageError(
            f"--lease-ttl: {lease_ttl} is under 1s: the lease would lapse between renewals"
        )
    bot = _bot(repo, options, metrics_port, out, ttl)
    beside = _beside(repo, ui, every, out) if ui is not None else None
    try:
        errors = _passes(bot, every, once, as_json, out)
    finally:
        if beside is not None:
            beside.close()
    if once and errors:
        raise typer.Exit(1)


def _bot(
    repo: str, options: ApplyOptions, metrics_port: int | None, out: Console, lease_ttl: float
) -> Reconciler:
    """The reconciler, with its metrics served, and the rollout's hooks."""
    metrics = BotMetrics()
    if metrics_port is not None:
        start_http_server(metrics_port, registry=metrics.registry)
    source = GitSource(repo, cache_dir(), branch="main")

    # lines only, no bars: the passes' summaries go to stdout between them
    say = ProgressSink(out, live=False).say

    # the forge is opened at the first pull request the rollout needs, in the bot's clone
    checks, adjust, scale = bot_hooks(
        source, lambda: open_forge(Path(source.git_dir), os.environ), say
    )
    return Reconciler(
        source,
        options,
        lease_ttl=lease_ttl,
        say=say,
        metrics=metrics,
        checks=checks,
        adjust=adjust,
        scale=scale,
    )


def _beside(repo: str, listen: str, every: float, out: Console) -> Beside:
    """The read-only web UI, served beside the bot (as `denv ui --listen`)."""
    from reconciler.cli.ui import Beside

    beside = Beside(repo, listen, refresh=min(every, 2.0))
    out.print(f"denv ui: {beside.start()}", markup=False)
    return beside


def _passes(bot: Reconciler, every: float, once: bool, as_json: bool, out: Console) -> int:
    """The bot's passes, each shown as it ends, until SIGTERM (or one, with `once`); the
    errors of the last pass. The bot is closed after."""

    def finish(signum: int, frame: FrameType | None) -> None:
        out.print("SIGTERM: stopping after the current step; the next pass resumes", markup=False)
        bot.stop_requested.set()

    def shown(result: PassResult) -> None:
        if as_json:
            print_json(_pass_json(result))
        else:
            console.print(
                time.strftime("%H:%M:%S ") + result.summary(), markup=False, soft_wrap=True
            )
            for error in result.report.errors[1:]:
                console.print(f"  error: {error}", markup=False)

    previous = signal.signal(signal.SIGTERM, finish)
    try:
        return bot.loop(every, once, shown)
    finally:
        signal.signal(signal.SIGTERM, previous)
        bot.close()


def _pass_json(result: PassResult) -> dict[str, Any]:
    return {
        "head": result.head,
        "planned": result.plan.counts,
        "done": dict(result.report.done),
        "errors": result.report.errors,
        "waiting": result.report.waiting,
        "resubmitted": result.report.resubmitted,
        "orphans": [o.model_dump(mode="json") for o in result.plan.orphans],
        "seconds": round(result.seconds, 3),
        "apply_seconds": round(result.apply_seconds, 3),
    }


def status(
    repo: LocationOption = ".",
    events: Annotated[
        bool,
        typer.Option(
            "--events",
            help="Every scaling decision of the elastic stages instead (time, deployment, "
            "from → to, why and the signal values), oldest first.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Per release, stage and fleet: desired and running revision, replicas ready/desired
    (an elastic stage's within its bounds, '3/4 (1–8)'), the stage's state, endpoint, drift
    and the bot's last error; under the table, why each elastic stage runs its count."""
    drivers = Drivers(warn=lambda m: print(f"warning: {m}", file=sys.stderr))
    source = GitSource(repo, cache_dir(), branch="main")
    try:
        if events:
            _events(*scaling_history(source, drivers), as_json)
            return
        with terminal.console(stderr=True).status("observing"):
            seen = look(source, drivers, stages=True)
    finally:
        drivers.close()
    if as_json:
        print_json(seen.as_json())
        return
    table = Table(
        "RELEASE",
        "STAGE",
        "FLEET",
        "DESIRED",
        "RUNNING",
        "READY",
        "STATE",
        "ENDPOINT",
        "DRIFT",
        box=None,
    )
    for row in seen.rows:
        table.add_row(
            row["release"],
            row["stage"],
            row["fleet"],
            (row["desired_revision"] or "—")[:12],
            ",".join(r[:12] for r in row["running_revisions"]) or "—",
            ready_text(row),
            row["state"],
            row["endpoint"] or "—",
            drift_text(row),
        )
    print_table(table)
    for line in status_lines(seen):
        console.print(line, markup=False)


def _events(head: str, found: list[dict[str, Any]], as_json: bool) -> None:
    """`denv status --events`: the scaling decisions the bots' notes keep, oldest first."""
    if as_json:
        print_json({"head": head, "events": found})
        return
    for event in found:
        console.print(event_line(event), markup=False, soft_wrap=True)
    if not found:
        console.print("no scaling decision recorded (no elastic stage, or no bot has run)")
