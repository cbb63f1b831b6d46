"""Adapter: the stop steps — free (units nothing wants, whose GPUs and ports new units may be
placed on) and trim (what a deployment no longer needs, after its router let it go)."""

from __future__ import annotations

import functools

from reconciler.reconcile.plan import Action
from reconciler.reconcile.steps.context import Context, fleet_of


def stop_all(ctx: Context, actions: list[Action]) -> None:
    """Routers first, then engines (a router never sends to an engine stopped under it)."""
    routers = [a for a in actions if a.role == "router"]
    engines = [a for a in actions if a.role != "router"]
    for batch in (routers, engines):
        ctx.each(functools.partial(_stop_one, ctx), batch, fleet_of)


def _stop_one(ctx: Context, action: Action) -> None:
    if ctx.stopping():
        return
    ctx.tell(f"- stop {action.unit} on {action.host} ({action.reason})")
    stop = functools.partial(ctx.stop, action.fleet, action.host, action.unit)
    if ctx.guard(action.unit, stop):
        ctx.report.count("stop")
