"""Composition: one `denv optimize start` — the run's setup resolved, the loop run with a
progress bar per trial and run, its end recorded (finished, stopped, failed), the promote
hook that opens the pull request and plans it like any, and `--watch`'s keep-running loop.
The typer module (optimize.py) parses and renders; this runs."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

from reconciler.bench.traffic_stats import trace_stats
from reconciler.cli import terminal
from reconciler.cli.common import load
from reconciler.cli.plan import cache_dir
from reconciler.cli.progress import ProgressSink
from reconciler.errors import DenvError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.config import open_forge
from reconciler.optimize.candidates import Row, StudyState
from reconciler.optimize.measuring import Effects, Promote, StudyStopped
from reconciler.optimize.promote import promote_row
from reconciler.optimize.runner import Loop
from reconciler.optimize.start import StartOptions, resolve, traffic_lines
from reconciler.optimize.state import StateStore
from reconciler.optimize.watch import catalog_marks, remeasure_reasons
from reconciler.pr.plan import plan_pull_request
from reconciler.spec.repo import Repo

messages = terminal.console(stderr=True)


def say(message: str) -> None:
    messages.print(message, markup=False, highlight=False, soft_wrap=True)


def _ended(state: StudyState, how: str, note: str | None, now: dt.datetime) -> StudyState:
    """The state as the run leaves it; a candidate still trialing did not finish its trial."""
    return state.unfinished(f"{how} before its trial ended").model_copy(
        update={"state": how, "note": note, "finished": now}
    )


def promoter(root: Path, repo: Repo, drivers: Drivers) -> Promote:
    """Open or update the study's pull request, then plan it as any pull request is."""

    def promote(state: StudyState, row: Row) -> int:
        forge = open_forge(root, os.environ)
        number = promote_row(forge, repo, state, row)
        plan_pull_request(forge, root, number, drivers, lambda _m: None, cache=cache_dir())
        return number

    return promote


def run_once(
    root: Path, options: StartOptions, store: StateStore, show_progress: bool
) -> StudyState:
    repo = load(root)
    now = dt.datetime.now(dt.UTC)
    setup, state = resolve(root, repo, options, store, now, say)
    store.save(state)
    loop: Loop | None = None
    shown = ProgressSink(messages)
    drivers = Drivers(warn=lambda m: shown.say(f"warning: {m}"))
    try:
        with shown:
            effects = Effects(
                store=store,
                drivers=drivers,
                promote=promoter(root, repo, drivers) if options.auto else None,
                say=shown.say,
                progress=shown.update if show_progress else lambda *_: None,
                ended=shown.end if show_progress else lambda *_: None,
            )
            loop = Loop(setup, effects, state)
            final = loop.run()
            store.save(_ended(final, "finished", None, dt.datetime.now(dt.UTC)))
    except (StudyStopped, KeyboardInterrupt) as exc:
        latest = loop.state if loop is not None else state
        stopped = store.stop_requested(latest.release, latest.stage)
        note = "stopped by `denv optimize stop`" if stopped else "interrupted"
        store.save(_ended(latest, "stopped", note, dt.datetime.now(dt.UTC)))
        if not stopped and isinstance(exc, KeyboardInterrupt):
            raise
    except DenvError as exc:
        latest = loop.state if loop is not None else state
        store.save(_ended(latest, "failed", str(exc), dt.datetime.now(dt.UTC)))
        raise
    finally:
        drivers.close()
    return store.require(state.release, state.stage)


def keep_running(
    root: Path, options: StartOptions, store: StateStore, every: float, last: StudyState
) -> None:
    """Keep running: look every `every` seconds; measure again when a trigger fires."""
    while True:
        deadline = time.monotonic() + every
        while time.monotonic() < deadline:  # a long wait, cut short by `denv optimize stop`
            if store.stop_requested(last.release, last.stage):
                return
            time.sleep(min(1.0, max(deadline - time.monotonic(), 0.0)))
        repo = load(root)
        lines, _ = traffic_lines(root, last.release, last.stage, options.traffic)
        body = repo.releases[last.release].release
        model = repo.recipes[body.recipe].model if body.recipe in repo.recipes else ""
        reasons = remeasure_reasons(
            last,
            trace_stats(lines),
            catalog_marks(repo, model),
            repo.policies.optimizer.drift_threshold,
        )
        if reasons:
            say("measuring again: " + "; ".join(reasons))
            last = run_once(root, options, store, show_progress=False)
