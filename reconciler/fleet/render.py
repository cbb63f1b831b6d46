"""Pure logic: what a deployment would run on a fleet as its file declares it (no probe):
the fleet's placement on declared hosts, then the engine's units. `denv recipe render`."""

from __future__ import annotations

from reconciler.catalog.deployments import Deployment
from reconciler.engines.launch import launch_units
from reconciler.engines.units import EngineContext, Unit
from reconciler.fleet.model.rules import FleetRules
from reconciler.fleet.placement.gpus import declared_states, place_deployment
from reconciler.spec.fleet import Fleet


def render(
    deployment: Deployment,
    fleet: Fleet,
    domain_size: int,
    context: EngineContext,
    rules: FleetRules,
) -> list[Unit]:
    placement = place_deployment(
        deployment, fleet, declared_states(fleet), domain_size, rules, context.base_port
    )
    return launch_units(deployment, fleet, placement, context)
