"""Adapter: step 2, start — engines and the routers that take their workers by API at once,
each engine into its router as soon as it is ready, then the routers waited for until they
serve; a P/D router (its workers in its argv) only after its engines. A unit that keeps
crashing is started again with exponential backoff (from its record's restart count and start
time); a job a scheduler's queue holds is reported pending, not waited for."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence

from reconciler.errors import DenvError
from reconciler.fleet.model.labels import DeploymentKey
from reconciler.fleet.threads import run_all
from reconciler.reconcile.desired import DesiredDeployment
from reconciler.reconcile.plan import Action
from reconciler.reconcile.steps.context import Context, backoff, deployment_key, fleet_of
from reconciler.reconcile.steps.routers import join, workers_api


def start_all(
    ctx: Context, actions: list[Action], deployments: Sequence[DesiredDeployment]
) -> None:
    """A router up beside its engines costs nothing and is there when the first one is ready;
    the engines are the long wait (minutes on GPUs), so a replica serves once it is ready,
    not once the last one is."""
    by_key = {d.key: d for d in deployments}

    def beside(action: Action) -> bool:
        deployment = by_key.get(deployment_key(action))
        return action.role != "router" or (deployment is not None and bool(workers_api(deployment)))

    def ready_and_joined(action: Action) -> bool:
        ready = ctx.wait_ready(action)
        if ready and action.desired is not None:
            join(ctx, by_key.get(deployment_key(action)), action.desired.unit)
        return ready

    queued: set[DeploymentKey] = set()  # deployments with an engine the queue holds
    for batch in ([a for a in actions if beside(a)], [a for a in actions if not beside(a)]):
        launched = ctx.each(functools.partial(_start_one, ctx), batch, fleet_of)
        started = [a for a, ok in zip(batch, launched, strict=True) if ok]
        _wait(ctx, [a for a in started if a.role != "router"], ready_and_joined, queued)
        routers = [a for a in started if a.role == "router"]
        # a router whose engines wait in a scheduler's queue cannot be ready yet
        idle = [a for a in routers if deployment_key(a) in queued]
        for action in idle:
            ctx.report.count("start")
            ctx.report.wait(f"{action.unit}: started, ready once its engines run")
        _wait(ctx, [a for a in routers if a not in idle], ctx.wait_ready, queued)


def _wait(
    ctx: Context, started: list[Action], ready: Callable[[Action], bool], queued: set[DeploymentKey]
) -> None:
    """Every unit launched waited for at once, then each one's outcome reported."""
    done = run_all(ready, started, min(16, len(started)))
    for action, ok in zip(started, done, strict=True):
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
    elif ctx.left_alone(action.fleet, action.host):
        pass  # its host stopped answering: the pass's one error for it says so
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
        found = [r for r in ctx.ask(fleet, host, lambda d: d.units(host)) if r.id == unit_id]
    except DenvError:
        return None
    pending = next((r for r in found if r.pending), None)
    return (pending.queue_reason or "queued") if pending is not None else None
