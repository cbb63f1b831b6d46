"""Pure logic: denv's simulator as an engine — one `denv sim serve` process per replica,
on node 0's host, standing for all of the replica's GPUs (the placement still holds them
all). It runs for recipes whose engine is `sim`, and for every recipe on a simulated fleet,
keeping the recipe's topology; it serves the metric names of the engine it models (`MODELLED`,
vLLM: metrics.py). Engine flags are not checked here: render the recipe on a real fleet for
that."""

from __future__ import annotations

from reconciler.catalog.deployments import Deployment
from reconciler.engines.base import health
from reconciler.engines.model.spec import SimSpec
from reconciler.engines.placement import BOOTSTRAP, HTTP, Placement
from reconciler.engines.replicas import unit_name
from reconciler.engines.units import EngineContext, Metrics, Unit
from reconciler.errors import EngineError
from reconciler.spec.recipe import AggregatedTopology, Recipe

MODELLED = "vllm"  # the engine whose metric names and scheduler defaults the simulator copies
RUNNING = "vllm:num_requests_running"  # the modelled engine's running gauge (metrics.py)
WAITING = "vllm:num_requests_waiting"  # and its queue's


def one_replica(recipe: Recipe) -> Recipe:
    """The recipe as one process of an aggregated deployment sees it: the replica count is
    not part of a replica's spec, so scaling out does not replace the replicas that run."""
    topology = recipe.topology
    if isinstance(topology, AggregatedTopology) and topology.replicas != 1:
        return recipe.model_copy(update={"topology": topology.model_copy(update={"replicas": 1})})
    return recipe


def units(deployment: Deployment, placement: Placement, context: EngineContext) -> list[Unit]:
    if context.model is None:
        raise EngineError(
            f"the simulator needs the architecture of {deployment.recipe.model} "
            f"(catalog/models.yaml) in the engine context"
        )
    found: list[Unit] = []
    recipe = one_replica(deployment.recipe)
    for role, pool in deployment.recipe.topology.pools():
        spec = SimSpec(  # the same for every replica of the pool: built and written once
            served_model=deployment.served_model,
            weights=deployment.weights,
            model=context.model,
            hardware=context.hardware,
            recipe=recipe,
            role=role,
            gpus=pool.gpus,
            time_scale=context.sim_time_scale,
            seed=context.seed,
        ).model_dump_json()
        for index in range(pool.replicas):
            nodes = placement.replica(role, index)
            head = nodes[0]
            port = head.at(HTTP)
            argv = [context.python, "-m", "reconciler", "sim", "serve"]
            argv += ["--host", head.address, "--port", str(port)]
            argv += ["--spec-json", spec]
            bootstrap = head.at(BOOTSTRAP) if role == "prefill" else None
            argv += ["--bootstrap-port", str(bootstrap)] if bootstrap else []
            found.append(
                Unit(
                    name=unit_name(role, index, 0, 1),
                    role=role,
                    replica=index,
                    node=0,
                    engine="sim",
                    host=head.host,
                    address=head.address,
                    argv=argv,
                    env={},
                    port=port,
                    gpus=pool.gpus,
                    gpu_indices=head.gpu_indices,
                    bootstrap_port=bootstrap,
                    readiness=health(),
                    health=health(),
                    metrics=Metrics(port=port, running=RUNNING, waiting=WAITING),
                    hosts=[node.host for node in nodes] if len(nodes) > 1 else [],
                )
            )
    return found
