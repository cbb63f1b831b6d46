"""Pure logic: a deployment's replicas as units — every replica of every pool on the slots
placement gave it, each node of a replica one process, named by role, replica and node."""

from __future__ import annotations

from collections.abc import Callable

from reconciler.catalog.deployments import Deployment
from reconciler.engines.base import FlagTable
from reconciler.engines.placement import HTTP, Placement, Slot
from reconciler.engines.units import EngineContext, Metrics, Probe, Unit
from reconciler.spec.recipe import Pool, Role

# A card's builder of one replica: its units on the replica's slots (node 0 first).
ReplicaBuilder = Callable[
    [Deployment, Role, Pool, list[Slot], EngineContext, FlagTable], list[Unit]
]


def replica_units(
    deployment: Deployment,
    placement: Placement,
    context: EngineContext,
    flags: FlagTable,
    replica: ReplicaBuilder,
) -> list[Unit]:
    """Every replica's units, pool by pool, each built by the card's `replica`."""
    found: list[Unit] = []
    for role, pool in deployment.recipe.topology.pools():
        for index in range(pool.replicas):
            found += replica(deployment, role, pool, placement.replica(role, index), context, flags)
    return found


def unit_name(role: str, replica: int, node: int, nodes: int) -> str:
    return f"{role}-{replica}" + (f"-node{node}" if nodes > 1 else "")


def engine_unit(
    engine: str,
    role: Role,
    slot: Slot,
    argv: list[str],
    env: dict[str, str],
    probe: Probe,
    running: str,
    flag_table: str,
    bootstrap_port: int | None = None,
    cpus: list[int] | None = None,
    waiting: str | None = None,
) -> Unit:
    """One process of an engine replica. Only node 0 of a replica serves HTTP, so only it
    gets a port, probes, metrics and (for a prefill replica) the bootstrap port."""
    port = None if slot.node else slot.at(HTTP)
    return Unit(
        name=unit_name(role, slot.replica, slot.node, slot.nodes),
        role=role,
        replica=slot.replica,
        node=slot.node,
        engine=engine,
        host=slot.host,
        address=slot.address,
        argv=argv,
        env=env,
        port=port,
        gpus=len(slot.gpu_indices),
        gpu_indices=slot.gpu_indices,
        cpus=cpus or [],
        bootstrap_port=bootstrap_port if port else None,
        readiness=probe if port else None,
        health=probe if port else None,
        metrics=Metrics(port=port, running=running, waiting=waiting) if port else None,
        flag_table=flag_table,
    )
