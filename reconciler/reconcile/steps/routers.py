"""Adapter: step 3, routers — each ready router's worker list made to match the ready engines
its deployment wants, with the surge replicas it keeps meanwhile; and the drain of a replica
that leaves its router (in-flight requests finish, up to a grace time)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from reconciler.reconcile import probes
from reconciler.reconcile.desired import DesiredDeployment
from reconciler.reconcile.plan import Action
from reconciler.reconcile.steps.context import Context


def sync_routers(ctx: Context, deployments: Sequence[DesiredDeployment]) -> None:
    """Each ready router serves exactly the ready engines its deployment wants."""
    ctx.each(functools.partial(sync_router, ctx), deployments, lambda d: d.fleet)


def sync_router(ctx: Context, deployment: DesiredDeployment, leaving: str | None = None) -> None:
    """The deployment's own router, with its own engines and surge replicas only."""
    router = next((u.unit for u in deployment.units if u.unit.role == "router"), None)
    engines = [u.unit for u in deployment.units if u.unit.role == "aggregated" and u.unit.port]
    if router is None or not engines:
        return  # P/D routers take their workers from their argv
    listed = probes.router_workers(router)
    if listed is None:
        return  # not up (yet): the next pass syncs it
    urls = {probes.base_url(u): u for u in engines}
    wanted = {url for url, u in urls.items() if url and url != leaving and probes.is_ready(u)}
    with ctx.lock:
        surging = set(ctx.room.surging.get(deployment.key, ()))
    wanted |= {url for url in surging if url != leaving}
    for url in sorted(wanted - set(listed)):
        if probes.add_worker(router, url):  # queued by the router: wait until it serves it
            serves = functools.partial(probes.serves, router, url)
            probes.wait_until(serves, 10, abort=ctx.stopping)
            ctx.report.count("router-add")
    for url, worker in sorted(listed.items()):
        if url not in wanted and probes.remove_worker(router, worker):
            ctx.report.count("router-remove")


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
