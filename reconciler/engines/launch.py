"""Pure logic: from a deployment on a fleet to every unit that runs it — the engine that runs
it (denv's simulator on a simulated fleet), that engine's units (its card's argv builder),
and the router in front."""

from __future__ import annotations

from reconciler.catalog.deployments import Deployment
from reconciler.engines.cards import card
from reconciler.engines.placement import Placement
from reconciler.engines.router import router_unit
from reconciler.engines.units import EngineContext, Unit
from reconciler.spec.fleet import Fleet


def engine_name(deployment: Deployment, fleet: Fleet) -> str:
    """The engine that runs the deployment: any recipe runs as the simulator on a simulated
    fleet (keeping its topology, so GPUs are counted as on real hardware)."""
    return "sim" if fleet.simulated else deployment.recipe.engine.name


def launch_units(
    deployment: Deployment, fleet: Fleet, placement: Placement, context: EngineContext
) -> list[Unit]:
    """Every unit of the deployment, router last."""
    name = engine_name(deployment, fleet)
    units = card(name).units(deployment, placement, context)
    return [*units, router_unit(name, units, placement, context)]
