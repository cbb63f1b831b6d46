"""Adapter: carrying out a plan on the fleets, wave by wave, health-gated.

0. prepare (steps/prepare.py) — every host that starts or replaces a unit makes its runtime
   and weights ready (reconciler.fleet.prepare), before any replica is stopped; a deployment
   with a host that cannot is left as it runs;
1. free (steps/stop.py) — stop units nothing wants (their GPUs and ports may be where new
   units go);
2. start (steps/start.py) — engines and their routers at once, each engine joining its router
   as soon as it is ready, then the routers waited for until they serve (a P/D router, whose
   workers are in its argv, only after its engines);
3. routers (steps/routers.py) — each router's worker list made to match the replicas that
   are ready;
4. roll (steps/roll.py, steps/surge.py) — replica by replica. Where free GPUs allow (surge),
   a replica of the new spec starts first beside the old one, on other GPUs and another port,
   and joins the router; then the old replica leaves the router, drains (in-flight requests
   finish, up to a grace time), stops, starts again on the new spec in its own place, becomes
   ready and rejoins; then the surge replica drains and stops. Without free GPUs the same
   happens without the surge replica: one replica unavailable at a time, refused when the
   gates policy says `max_unavailable: 0`. A replica that never becomes ready is put back on
   its previous spec and the roll of that deployment stops with the error;
5. trim (steps/stop.py) — what a deployment no longer needs leaves its router, drains, and
   stops.

Each step is one module of reconcile/steps/ (what they share: steps/context.py); the Applier
only runs them in this order, with a fault point between two steps for the crash tests.

Every step reads what it needs from the plan, which is computed afresh from what the agents
report each pass, and every agent verb is idempotent: a reconciler killed at any point
converges on its next pass. A unit that keeps crashing is started again with exponential
backoff (from its record's restart count and start time).

Within a wave, actions run at once — starts, stops and router updates on different hosts,
the rolls of different deployments — at most the fleet's `parallel_actions` at a time on a
fleet, fleets side by side; the replaces of one deployment stay one after another, in the
plan's order. An action that fails is reported and the others go on; a host that does not
answer holds only its own actions, for as long as its driver's deadline.

SIGTERM (`stopping`) ends every wait within seconds — prepare's polls, readiness, drains,
routers taking a worker — and starts no further action; what is left is what a kill at
that point leaves, and the next pass takes it up: a prepare job goes on on its host and is
joined, a unit started is kept once ready, a replica drained but not stopped rejoins its
router, a surge replica left over is stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence

from reconciler.faults import fault_point
from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.model.observed import FleetObservation
from reconciler.reconcile.desired import DesiredDeployment
from reconciler.reconcile.plan import Action, Plan, Wave
from reconciler.reconcile.steps.context import (
    DEFAULTS,
    ApplyOptions,
    ApplyReport,
    Context,
    Room,
    deployment_key,
)
from reconciler.reconcile.steps.prepare import prepare
from reconciler.reconcile.steps.roll import roll
from reconciler.reconcile.steps.routers import sync_routers
from reconciler.reconcile.steps.start import start_all
from reconciler.reconcile.steps.stop import stop_all
from reconciler.spec.repo import Repo

__all__ = ["Applier", "ApplyOptions", "ApplyReport"]


class Applier:
    def __init__(
        self,
        repo: Repo,
        drivers: Drivers,
        options: ApplyOptions = DEFAULTS,
        say: Callable[[str], None] = lambda message: None,
        stopping: Callable[[], bool] = lambda: False,
        lost: MutableMapping[str, str] | None = None,
    ) -> None:
        self.context = Context(repo, drivers, options, say, stopping, lost)

    def stopping(self) -> bool:
        return self.context.stopping()

    def apply(
        self,
        plan: Plan,
        deployments: Sequence[DesiredDeployment],
        observations: Mapping[str, FleetObservation] | None = None,
    ) -> ApplyReport:
        ctx = self.context
        ctx.observations = observations or {}
        ctx.room = Room.of(deployments)
        blocked = prepare(ctx, plan)
        by_wave: dict[Wave, list[Action]] = {}
        for action in plan.actions:
            if deployment_key(action) not in blocked:
                by_wave.setdefault(action.wave, []).append(action)
        fault_point("after-prepare")
        stop_all(ctx, by_wave.get(Wave.FREE, []))
        fault_point("after-free")
        start_all(ctx, by_wave.get(Wave.START, []), deployments)
        fault_point("after-start")
        sync_routers(ctx, deployments)
        fault_point("after-routers")
        roll(ctx, by_wave.get(Wave.ROLL, []), deployments)
        fault_point("after-roll")
        sync_routers(ctx, deployments)
        stop_all(ctx, by_wave.get(Wave.TRIM, []), deployments)  # their routers were synced
        fault_point("after-trim")
        return ctx.report
