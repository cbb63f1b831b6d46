"""Adapter: step 3, routers — each ready router's worker list made to match the ready engines
its deployment wants, with the surge replicas it keeps meanwhile; a replica started joining
its router as soon as it is ready; and the drain of a replica that leaves its router
(in-flight requests finish, up to a grace time)."""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence

from reconciler.engines.units import Unit
from reconciler.reconcile import probes
from reconciler.reconcile.desired import DesiredDeployment
from reconciler.reconcile.plan import Action
from reconciler.reconcile.steps.context import Context

# Seconds between two looks at a router's worker list while it takes workers: one local GET,
# and a replica waiting on it is ready already.
TAKE_POLL_S = 0.05


def workers_api(deployment: DesiredDeployment) -> tuple[Unit, list[Unit]] | None:
    """The deployment's router and the engines it takes through its worker API; None when it
    has none, or it is a P/D router (those take their workers from their argv)."""
    router = next((u.unit for u in deployment.units if u.unit.role == "router"), None)
    engines = [u.unit for u in deployment.units if u.unit.role == "aggregated" and u.unit.port]
    return (router, engines) if router is not None and engines else None


def sync_routers(ctx: Context, deployments: Sequence[DesiredDeployment]) -> None:
    """Each ready router serves exactly the ready engines its deployment wants."""
    ctx.each(functools.partial(sync_router, ctx), deployments, lambda d: d.fleet)


def sync_router(ctx: Context, deployment: DesiredDeployment, leaving: str | None = None) -> None:
    """The deployment's own router, with its own engines and surge replicas only."""
    found = workers_api(deployment)
    if found is None or ctx.fenced(deployment.fleet) is not None:
        return  # no router, or a fleet whose lease the pass lost (its actions say so)
    router, engines = found
    listed = probes.router_workers(router)
    if listed is None:
        return  # not up (yet): the next pass syncs it
    urls = {probes.base_url(u): u for u in engines}
    wanted = {url for url, u in urls.items() if url and url != leaving and probes.is_ready(u)}
    with ctx.lock:
        surging = set(ctx.room.surging.get(deployment.key, ()))
    wanted |= {url for url in surging if url != leaving}
    for _ in take(ctx, router, sorted(wanted - set(listed))):
        ctx.report.count("router-add")
    for url, worker in sorted(listed.items()):
        if url not in wanted and probes.remove_worker(router, worker):
            ctx.report.count("router-remove")


def join(ctx: Context, deployment: DesiredDeployment | None, unit: Unit) -> None:
    """A replica that has just become ready, into its deployment's router now, if that router
    answers (else the router sync adds it): part of its start, not counted apart."""
    found = workers_api(deployment) if deployment is not None else None
    if deployment is not None:
        ctx.check_fence(deployment.fleet)
    url = probes.base_url(unit)
    if found is None or url is None or url not in {probes.base_url(u) for u in found[1]}:
        return
    listed = probes.router_workers(found[0])
    if listed is not None and url not in listed:
        take(ctx, found[0], [url])


def take(ctx: Context, router: Unit, urls: Collection[str]) -> list[str]:
    """Ask the router to take every URL at once, then wait until it serves all it accepted
    (it queues each; up to 10 s); the URLs it accepted."""
    added = [url for url in urls if probes.add_worker(router, url)]
    if added:

        def serves_all() -> bool:
            return set(added) <= set(probes.router_workers(router) or {})

        probes.wait_until(serves_all, 10, interval=TAKE_POLL_S, abort=ctx.stopping)
    return added


def drain(ctx: Context, deployment: DesiredDeployment | None, action: Action) -> None:
    """Out of the router, then wait until its in-flight requests finish (or grace)."""
    if deployment is None or action.desired is None:
        return
    unit = action.desired.unit
    sync_router(ctx, deployment, leaving=probes.base_url(unit))
    probes.wait_until(
        lambda: (probes.in_flight(unit) or 0) == 0,
        ctx.options.drain_grace,
        interval=0.1,
        abort=ctx.stopping,
    )
