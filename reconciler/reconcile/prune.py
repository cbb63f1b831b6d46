"""Pure logic: what `denv prune` stops — the orphans (reconcile/orphans.py) of the fleets
chosen, as the plan stops them where a fleet's file says `prune: true`: routers first, then
engines, nothing else."""

from __future__ import annotations

from collections.abc import Collection

from reconciler.reconcile.desired import Desired
from reconciler.reconcile.plan import ActionKind, ObservedUnits, Plan, plan


def prune_plan(desired: Desired, observed: ObservedUnits, fleets: Collection[str]) -> Plan:
    """The plan with the stops of the orphans on `fleets` only, as if those fleets pruned."""
    planned = plan(desired.model_copy(update={"prune": frozenset(fleets)}), observed)
    chosen = {(o.fleet, o.host, o.unit) for o in planned.orphans if o.prune}
    actions = tuple(
        a
        for a in planned.actions
        if a.kind == ActionKind.STOP and (a.fleet, a.host, a.unit) in chosen
    )
    orphans = tuple(o for o in planned.orphans if o.prune)
    return planned.model_copy(update={"actions": actions, "orphans": orphans})
