"""Adapter: a surge replica for one replace of the roll — the new spec started beside the old
replica on free GPUs and another port, in the router before the old one leaves it, and
drained and stopped once the old replica serves again (reconcile/surge.py places it)."""

from __future__ import annotations

from reconciler.engines.units import Unit
from reconciler.faults import fault_point
from reconciler.fleet.launching import launch_payload
from reconciler.fleet.placement.gpus import declared_states, trial_gpus
from reconciler.reconcile import probes
from reconciler.reconcile.desired import DesiredDeployment
from reconciler.reconcile.plan import Action
from reconciler.reconcile.steps.context import Context
from reconciler.reconcile.steps.routers import sync_router
from reconciler.reconcile.surge import surge_unit

Surge = tuple[Unit, str]  # the surge replica and its unit id


def surge(ctx: Context, action: Action, deployment: DesiredDeployment | None) -> Surge | None:
    """A replica of the new spec beside the old one, on free GPUs and a free port, in the
    router before the old one leaves it: capacity never drops during the roll. None
    when it cannot be placed (then the roll is one replica at a time)."""
    assert action.desired is not None
    if action.desired.replica_gpus != len(action.desired.unit.gpu_indices):
        return None  # a multi-node replica moves as a whole or not at all
    if deployment is None:
        return None
    unit = _hold(ctx, action)
    if unit is None:
        return None
    surge_id = f"{action.unit}~surge"
    if not ctx.guard(surge_id, lambda: ctx.stop(action.fleet, action.host, surge_id)):
        return None  # a surge replica left over that could not be stopped: none this time
    payload = {**launch_payload(unit, surge_id), **action.desired.placement()}
    ctx.tell(f"+ surge {surge_id} on {action.host} (GPUs {unit.gpu_indices})")
    if not ctx.guard(surge_id, lambda: ctx.start(action.fleet, action.host, payload)):
        return None  # it may run: its GPUs stay held for this pass
    if not ctx.wait_unit(action.fleet, action.host, surge_id, unit):
        if ctx.guard(surge_id, lambda: ctx.stop(action.fleet, action.host, surge_id)):
            _release(ctx, action, unit)
        return None
    url = probes.base_url(unit)
    if url is not None:
        with ctx.lock:
            ctx.room.surging.setdefault(deployment.key, set()).add(url)
        sync_router(ctx, deployment)
    fault_point("roll-surged")
    return unit, surge_id


def retire(
    ctx: Context, action: Action, deployment: DesiredDeployment | None, surged: Surge
) -> None:
    """The surge replica out of its router, drained, stopped, and its GPUs and port free."""
    unit, surge_id = surged
    url = probes.base_url(unit)
    if deployment is not None:
        with ctx.lock:
            ctx.room.surging.get(deployment.key, set()).discard(url or "")
        sync_router(ctx, deployment)
    drained = probes.wait_until(
        lambda: (probes.in_flight(unit) or 0) == 0,
        ctx.options.drain_grace,
        interval=0.1,
        abort=ctx.stopping,
    )
    if not drained and ctx.stopping():
        ctx.left(surge_id, "out of its router, still draining")  # the next pass stops it
        return
    if ctx.guard(surge_id, lambda: ctx.stop(action.fleet, action.host, surge_id)):
        _release(ctx, action, unit)


def _hold(ctx: Context, action: Action) -> Unit | None:
    """The surge replica, on GPUs and a port that no other surge of this pass holds
    (deployments roll side by side); they are held until it stops."""
    assert action.desired is not None
    where = (action.fleet, action.host)
    room = ctx.room
    with ctx.lock:
        free = set(_free_gpus(ctx, action)) - room.surge_gpus.get(where, set())
        ports = _ports(ctx, action) | room.surge_ports.get(where, set())
        unit = surge_unit(action.desired.unit, free, ports)
        if unit is not None and unit.port is not None:
            room.surge_gpus.setdefault(where, set()).update(unit.gpu_indices)
            room.surge_ports.setdefault(where, set()).add(unit.port)
    return unit


def _release(ctx: Context, action: Action, unit: Unit) -> None:
    where = (action.fleet, action.host)
    with ctx.lock:
        ctx.room.surge_gpus.get(where, set()).difference_update(unit.gpu_indices)
        ctx.room.surge_ports.get(where, set()).discard(unit.port or 0)


def _free_gpus(ctx: Context, action: Action) -> list[int]:
    """GPUs of the action's host that nothing uses now or after this pass (and that are
    not kept for trials)."""
    seen = ctx.observations.get(action.fleet)
    if seen is None or action.host not in seen.hosts:
        return []
    fleet = ctx.repo.fleets[action.fleet]
    states = declared_states(fleet)
    trial = trial_gpus(fleet, states).get(action.host, set())
    free = set(seen.free_gpus(action.host, trial))
    return sorted(free - ctx.room.desired_gpus.get((action.fleet, action.host), set()))


def _ports(ctx: Context, action: Action) -> set[int]:
    seen = ctx.observations.get(action.fleet)
    host = seen.hosts.get(action.host) if seen is not None else None
    used = {u.port for u in host.units if u.port} if host is not None else set()
    return used | ctx.room.desired_ports.get((action.fleet, action.host), set())
