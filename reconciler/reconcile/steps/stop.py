"""Adapter: the stop steps — free (units nothing wants, whose GPUs and ports new units may be
placed on: a pruned orphan drains first, its router letting its engines go) and trim (what a
deployment no longer needs — a scale-down, a moved unit — after its router let it go: it
drains first, in-flight requests finishing up to a grace time)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from reconciler.engines.units import Unit
from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.model.observed import RecordedMetrics
from reconciler.reconcile import probes
from reconciler.reconcile.desired import DesiredDeployment
from reconciler.reconcile.plan import Action, Wave
from reconciler.reconcile.steps.context import Context, deployment_key, fleet_of


def stop_all(
    ctx: Context, actions: list[Action], deployments: Sequence[DesiredDeployment] = ()
) -> None:
    """Routers first, then engines (a router never sends to an engine stopped under it). An
    engine trimmed from a deployment that still runs waits until its in-flight requests
    finish, or its grace: the deployment's scaling policy's, else the applier's."""
    by_key = {d.key: d for d in deployments}
    routers = [a for a in actions if a.role == "router"]
    engines = [a for a in actions if a.role != "router"]
    _drain_pruned([a for a in actions if a.wave == Wave.FREE], ctx)
    for batch in (routers, engines):
        ctx.each(functools.partial(_stop_one, ctx, by_key), batch, fleet_of)


def _stop_one(
    ctx: Context, by_key: dict[tuple[str, str, str], DesiredDeployment], action: Action
) -> None:
    if ctx.stopping():
        return
    deployment = by_key.get(deployment_key(action))
    if action.wave == Wave.TRIM and action.role != "router" and deployment is not None:
        _drain(ctx, deployment, action)
    ctx.tell(f"- stop {action.unit} on {action.host} ({action.reason})")
    stop = functools.partial(ctx.stop, action.fleet, action.host, action.unit)
    if ctx.guard(action.unit, stop):
        ctx.report.count("stop")


def _drain(ctx: Context, deployment: DesiredDeployment, action: Action) -> None:
    """Out of its router already (the routers were synced before the trim): wait until the
    engine has no request in flight, up to the grace time."""
    probe = _probe(ctx, deployment, action)
    if probe is None:
        return
    grace = ctx.options.drain_grace
    if deployment.bounds is not None:
        policy = ctx.repo.policies.scaling.get(deployment.bounds.policy)
        grace = policy.down.drain_grace if policy is not None else grace
    ctx.tell(f"  drain {action.unit} on {action.host} (up to {grace:g}s)")
    drained = probes.wait_until(
        lambda: (probes.in_flight(probe) or 0) == 0, grace, interval=0.1, abort=ctx.stopping
    )
    if drained:
        ctx.report.count("drain")


def _probe(ctx: Context, deployment: DesiredDeployment, action: Action) -> Unit | None:
    """The leaving engine as a unit to ask for its requests in flight: its deployment's
    engines export their metrics the same way, on the port the record names. None for one
    that does not run (exited, or a job the scheduler never started): nothing in flight."""
    record = action.running
    if record is None or not record.alive:
        return None
    sibling = next(
        (u.unit for u in deployment.units if u.unit.role == action.role and u.unit.metrics),
        None,
    )
    if record.port is None or sibling is None or sibling.metrics is None:
        return None
    address = _address(ctx, action)
    if address is None or sibling.port != sibling.metrics.port:
        return None  # metrics on a port of their own: not known for the record
    metrics = sibling.metrics.model_copy(update={"port": record.port})
    return sibling.model_copy(
        update={"host": action.host, "address": address, "port": record.port, "metrics": metrics}
    )


def _drain_pruned(actions: Sequence[Action], ctx: Context) -> None:
    """Pruned orphans (the only stops of the free wave): git no longer has their deployment,
    but their router may still carry requests. Each router lets its workers go, then the
    engines get until their requests in flight finish, all at once, up to the applier's drain
    grace (the stage's own went with its file). What an engine's record says of its metrics
    is what is asked: an engine launched without it (by an older bot) is not waited for."""
    live = [a for a in actions if a.running is not None and a.running.alive]
    live = [a for a in live if ctx.fenced(a.fleet) is None and not ctx.left_alone(a.fleet, a.host)]
    for action in live:
        root = _root(ctx, action)
        if action.role == "router" and root is not None:
            for worker in (probes.workers_at(root) or {}).values():
                if probes.remove_worker_at(root, worker):
                    ctx.report.count("router-remove")
    engines: list[tuple[Action, str, RecordedMetrics]] = []
    for action in live:
        metrics = action.running.metrics if action.running is not None else None
        root = _root(ctx, action)
        if action.role != "router" and metrics is not None and root is not None:
            engines.append((action, root + metrics.path, metrics))
    if not engines:
        return
    grace = ctx.options.drain_grace
    for action, _, _ in engines:
        ctx.tell(f"  drain {action.unit} on {action.host} (up to {grace:g}s; orphan, pruned)")

    def idle(url: str, metrics: RecordedMetrics) -> bool:
        return (probes.in_flight_at(url, metrics.running, metrics.waiting) or 0) == 0

    if probes.wait_until(
        lambda: all(idle(url, metrics) for _, url, metrics in engines), grace, 0.1,
        abort=ctx.stopping,
    ):  # fmt: skip
        for _ in engines:
            ctx.report.count("drain")


def _address(ctx: Context, action: Action) -> str | None:
    """The address the bot reaches the action's host at, from its fleet."""
    fleet = ctx.repo.fleets.get(action.fleet)
    host = next((h for h in fleet.hosts if h.name == action.host), None) if fleet else None
    return rules_of(fleet).address(host) if fleet is not None and host is not None else None


def _root(ctx: Context, action: Action) -> str | None:
    """http://address:port of the unit the action stops, from its record and its fleet."""
    address = _address(ctx, action)
    port = action.running.port if action.running is not None else None
    return f"http://{address}:{port}" if address is not None and port is not None else None
