"""Adapter: step 2, start — engines, wait until ready, then routers, wait until ready. A unit
that keeps crashing is started again with exponential backoff (from its record's restart count
and start time); a job a scheduler's queue holds is reported pending, not waited for."""

from __future__ import annotations

import functools
import time

from reconciler.errors import DenvError
from reconciler.fleet.model.labels import DeploymentKey
from reconciler.fleet.threads import run_all
from reconciler.reconcile.plan import Action
from reconciler.reconcile.steps.context import Context, backoff, deployment_key, fleet_of


def start_all(ctx: Context, actions: list[Action]) -> None:
    engines = [a for a in actions if a.role != "router"]
    routers = [a for a in actions if a.role == "router"]
    queued: set[DeploymentKey] = set()  # deployments with an engine the queue holds
    for batch in (engines, routers):
        launched = ctx.each(functools.partial(_start_one, ctx), batch, fleet_of)
        started = [a for a, ok in zip(batch, launched, strict=True) if ok]
        # a router whose engines wait in a scheduler's queue cannot be ready yet
        idle = [a for a in started if a.role == "router" and deployment_key(a) in queued]
        for action in idle:
            ctx.report.count("start")
            ctx.report.wait(f"{action.unit}: started, ready once its engines run")
        started = [a for a in started if a not in idle]
        ready = run_all(ctx.wait_ready, started, min(16, len(started)))
        for action, ok in zip(started, ready, strict=True):
            _started(ctx, action, ok, queued)


def _start_one(ctx: Context, action: Action) -> bool:
    if ctx.stopping():
        return False
    record = action.running
    if record is not None and not record.alive and record.exited_at is not None:
        left = record.exited_at + backoff(record.restarts, ctx.options) - time.time()
        if left > 0:
            ctx.report.wait(
                f"{action.unit} keeps exiting (exit {record.exit_code}, "
                f"{record.restarts} restarts): next start in {left:.0f}s"
            )
            return False
    ended = record is not None and record.ended_job
    ctx.tell(f"+ start {action.unit} on {action.host}" + (f" ({action.reason})" * ended))
    if ended:  # the scheduler ended its job: the pass says so
        ctx.report.resubmit(f"{action.unit} ({action.reason})")
    return ctx.guard(action.unit, lambda: ctx.launch(action))


def _started(ctx: Context, action: Action, ready: bool, queued: set[DeploymentKey]) -> None:
    """A unit launched: ready, cut short by SIGTERM, pending in a queue, or never ready."""
    if ready:
        ctx.report.count("start")
    elif ctx.stopping():
        ctx.left(action.unit, "started, not ready yet")
    elif why := _queued(ctx, action.fleet, action.host, action.unit):
        ctx.report.count("submit")
        ctx.report.wait(f"{action.unit} on {action.host}: pending ({why})")
        queued.add(deployment_key(action))
    else:
        ctx.report.error(
            f"{action.unit} on {action.host}: not ready after "
            f"{ctx.options.ready_timeout:g}s (see `denv fleet logs`)"
        )


def _queued(ctx: Context, fleet: str, host: str, unit_id: str) -> str | None:
    """Why the unit's job waits in the scheduler's queue; None when it does not."""
    try:
        found = [r for r in ctx.driver(fleet).units(host) if r.id == unit_id]
    except DenvError:
        return None
    pending = next((r for r in found if r.pending), None)
    return (pending.queue_reason or "queued") if pending is not None else None
