"""Adapter: step 4, roll — replica by replica. Where free GPUs allow, a surge replica of the
new spec serves beside the old one (steps/surge.py); the old replica leaves its router,
drains, stops, starts again on the new spec in its own place, becomes ready and rejoins.
Without a surge replica one replica is unavailable at a time, refused when the gates policy
says `max_unavailable: 0`. A replica that never becomes ready is put back on its previous
spec and the roll of that deployment stops with the error."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from reconciler.faults import fault_point
from reconciler.fleet.model.labels import DeploymentKey
from reconciler.reconcile import probes
from reconciler.reconcile.desired import DesiredDeployment
from reconciler.reconcile.plan import Action
from reconciler.reconcile.steps.context import Context, deployment_key
from reconciler.reconcile.steps.routers import drain, sync_router
from reconciler.reconcile.steps.surge import retire, surge


def roll(ctx: Context, actions: list[Action], deployments: Sequence[DesiredDeployment]) -> None:
    """Deployments roll side by side; each one's replaces in the plan's order, the
    roll of a deployment ending at its first failure."""
    by_key = {d.key: d for d in deployments}
    rolls: dict[DeploymentKey, list[Action]] = {}
    for action in actions:
        rolls.setdefault(deployment_key(action), []).append(action)

    def one(key: DeploymentKey) -> None:
        for action in rolls[key]:
            if ctx.stopping() or not replace(ctx, action, by_key.get(key)):
                return

    ctx.each(one, list(rolls), lambda key: key[2])


def replace(ctx: Context, action: Action, deployment: DesiredDeployment | None) -> bool:
    assert action.running is not None and action.desired is not None
    if ctx.left_alone(action.fleet, action.host):
        return False  # its host left a call unanswered: the pass's error says so
    changed = ", ".join(c.name or c.field for c in action.changes) or "spec"
    ctx.tell(f"~ replace {action.unit} on {action.host} ({changed})")
    surged = surge(ctx, action, deployment) if action.surge else None
    if surged is None and ctx.stopping():
        return False
    if surged is None and action.role != "router" and _unavailable_forbidden(ctx):
        ctx.report.error(
            f"{action.unit}: no free GPUs for a surge replica and the gates policy allows "
            f"no replica to be unavailable (max_unavailable: 0); not replaced"
        )
        return False
    try:
        return not ctx.stopping() and _in_place(ctx, action, deployment)
    finally:
        if surged is not None:
            retire(ctx, action, deployment, surged)


def _unavailable_forbidden(ctx: Context) -> bool:
    return ctx.repo.policies.gates.max_unavailable == 0


def _in_place(ctx: Context, action: Action, deployment: DesiredDeployment | None) -> bool:
    """Drained, stopped, started on the new spec and back in its router; else put back."""
    stop = functools.partial(ctx.stop, action.fleet, action.host, action.unit)
    if ctx.left_alone(action.fleet, action.host):
        return False  # not drained for a stop that would not be asked
    if action.role != "router":
        drain(ctx, deployment, action)
        fault_point("roll-drained")
    if ctx.stopping():
        ctx.left(action.unit, "drained, not replaced")  # back in its router after the roll
        return False
    if not ctx.guard(action.unit, stop):
        return False
    fault_point("roll-stopped")
    if ctx.guard(action.unit, lambda: ctx.launch(action)) and ctx.wait_ready(action):
        fault_point("roll-started")
        if deployment is not None:
            sync_router(ctx, deployment)
        ctx.report.count("replace")
        return True
    if ctx.stopping():
        ctx.left(action.unit, "started on the new spec, not ready yet")
        return False
    if ctx.left_alone(action.fleet, action.host):
        return False  # not put back on a host that no longer answers: the next pass looks
    _put_back(ctx, action, deployment)
    return False


def _put_back(ctx: Context, action: Action, deployment: DesiredDeployment | None) -> None:
    """The new spec did not become ready: the unit runs again exactly as it ran before."""
    assert action.running is not None and action.desired is not None
    ctx.report.error(
        f"{action.unit} on {action.host}: the new spec did not become ready; "
        f"put back on the previous one"
    )
    ctx.guard(action.unit, lambda: ctx.stop(action.fleet, action.host, action.unit))
    running, unit = action.running, action.desired.unit  # same address and port as before
    if ctx.guard(action.unit, lambda: ctx.relaunch(action.fleet, action.host, running)):
        ready = functools.partial(probes.is_ready, unit)
        probes.wait_until(ready, ctx.options.ready_timeout, abort=ctx.stopping)
        if deployment is not None:
            sync_router(ctx, deployment)
