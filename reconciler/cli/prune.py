"""CLI: `denv prune` — stop the orphans: units denv started whose deployment git no longer
has (a release or stage removed, `main` rewound). It says what it will stop, then stops it
(drained first, then routers, then engines), as the bot does on a fleet whose file says
`prune: true`."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from reconciler.cli import terminal
from reconciler.cli.common import JsonOption, console, print_json
from reconciler.cli.plan import LocationOption, cache_dir
from reconciler.cli.progress import ProgressSink
from reconciler.errors import UsageError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.reconcile.apply import Applier
from reconciler.reconcile.desired import observed_units
from reconciler.reconcile.prune import prune_plan
from reconciler.reconcile.snapshot import snapshot, with_removals
from reconciler.reconcile.source import GitSource

FleetOption = Annotated[
    str | None, typer.Option("--fleet", help="Only this fleet's orphans (default: every fleet).")
]


def prune(
    repo: LocationOption = ".", fleet: FleetOption = None, as_json: JsonOption = False
) -> None:
    """Stop the units denv started whose deployment git no longer has (orphans, shown by `denv
    plan` and `denv status`): what it stops is printed first. Exit 1 when a stop failed or a
    host did not answer (orphans there are not known)."""
    out = terminal.console(stderr=True)
    say = ProgressSink(out, live=False).say
    source = GitSource(repo, cache_dir(), branch="main")
    drivers = Drivers(warn=lambda m: print(f"warning: {m}", file=sys.stderr))
    try:
        snap = snapshot(source, drivers, status=say)
        if fleet is not None and fleet not in snap.repo.fleets:
            known = ", ".join(sorted(snap.repo.fleets))
            raise UsageError(f"no fleet '{fleet}' at {snap.head[:12]} (known: {known})")
        fleets = [fleet] if fleet is not None else list(snap.repo.fleets)
        chosen = prune_plan(snap.desired, observed_units(snap.observations), fleets)
        chosen = chosen.model_copy(
            update={"orphans": with_removals(chosen.orphans, source, snap.head)}
        )
        for orphan in chosen.orphans:
            say(f"to stop: {orphan.text().removesuffix('; stopped: its fleet prunes')}")
        if not chosen.orphans:
            say("no orphan to stop")
        report = Applier(snap.repo, drivers, say=say).apply(chosen, [], snap.observations)
    finally:
        drivers.close()
    unreached = {f: sorted(h) for f, h in snap.unreached().items() if h and f in fleets}
    found: dict[str, Any] = {
        "head": snap.head,
        "orphans": [o.model_dump(mode="json") for o in chosen.orphans],
        "stopped": report.done.get("stop", 0),
        "errors": report.errors,
        "unreachable": unreached,
    }
    if as_json:
        print_json(found)
    else:
        line = f"stopped {found['stopped']} of {len(chosen.orphans)} orphaned units"
        console.print(line, markup=False)
        for error in report.errors:
            console.print(f"  error: {error}", markup=False)
        for name, hosts in sorted(unreached.items()):
            console.print(f"  fleet {name}: not reached, not known: {', '.join(hosts)}")
    if report.errors or unreached:
        raise typer.Exit(1)
