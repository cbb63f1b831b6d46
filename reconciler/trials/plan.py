"""Pure logic: a trial deployment — one recipe alone on a fleet's trial GPUs, for a bench run
(and later a parity check or an optimizer trial).

Its units are named `trial-<id>.<unit>`, so they never collide with a release's
(`<release>.<stage>.<fleet>.<unit>`), and carry labels without `release`, `stage` and `fleet`,
so the reconciler never counts them as its own and never touches them
(reconciler.fleet.model.labels), and an `owner` label naming the process that tears them down
(reconciler.trials.owner). They take only trial GPUs that no unit holds, and a block of
ports no unit on those hosts uses. They run as a release's units would: in the host's runtime
(container or venv; the simulator on a simulated fleet), loading the weights that the prepare
step caches on the host.
"""

from __future__ import annotations

import hashlib

from reconciler.catalog.deployments import Deployment
from reconciler.engines.base import url
from reconciler.engines.launch import engine_name, launch_units
from reconciler.engines.placement import PORT_BLOCK
from reconciler.engines.units import EngineContext, Unit
from reconciler.fleet.kinds.cards import card_of
from reconciler.fleet.launching import HostedUnit, one_unit_per_replica
from reconciler.fleet.model.observed import FleetObservation
from reconciler.fleet.model.rules import FleetRules
from reconciler.fleet.placement.gpus import place_on_trial_gpus
from reconciler.fleet.placement.placer import host_states
from reconciler.fleet.placement.ports import PortBook, address_of
from reconciler.spec.base import Spec
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo

# Apart from the reconciler's 8000, so that a reconcile pass placing a release at the same
# moment does not pick the same block (each still skips every port a unit holds).
TRIAL_BASE_PORT = 18000
# Trials planned at the same moment by different bots each start their search at a block of
# their own, so that neither takes the ports the other is about to bind.
TRIAL_PORT_SPREAD = 64
TRIAL_RELEASE = "bench"  # what the trial's Deployment names as its release


def trial_base_port(trial: str) -> int:
    spread = int(hashlib.sha256(trial.encode()).hexdigest()[:8], 16) % TRIAL_PORT_SPREAD
    return TRIAL_BASE_PORT + spread * PORT_BLOCK


def trial_prefix(trial: str) -> str:
    return f"trial-{trial}."


def recipe_digest(recipe: Recipe) -> str:
    """sha256 of the recipe as resolved (overrides applied), in canonical JSON: two results
    with the same digest ran the same recipe."""
    return hashlib.sha256(recipe.model_dump_json().encode()).hexdigest()


def default_weights(repo: Repo, recipe: Recipe) -> str:
    """The weights a release running this recipe pins (the first by name); else the catalog
    model's Hugging Face repository, unpinned (enough for the simulator); else the model."""
    for _, release in sorted(repo.releases.items()):
        body = release.release
        runs = {body.recipe, *(r for stage in release.stages for r in stage.recipes.values())}
        if recipe.id in runs:
            return body.weights
    arch = repo.models.get(recipe.model)
    return f"hf://{arch.hf_repo}" if arch is not None and arch.hf_repo else recipe.model


def trial_spec(recipe: Recipe, fleet: str, trial: str, weights: str) -> Deployment:
    return Deployment(
        release=TRIAL_RELEASE,
        stage=trial,
        fleet=fleet,
        served_model=recipe.model,
        weights=weights,
        recipe=recipe,
    )


class TrialUnit(HostedUnit):
    """A unit of a trial deployment: labels without release, stage and fleet, so the
    reconciler never counts it as its own."""


class TrialPlan(Spec):
    trial: str
    engine: str  # the engine that runs it: `sim` on a simulated fleet
    deployment: Deployment
    units: tuple[TrialUnit, ...]  # engines in placement order, router last

    @property
    def engines(self) -> tuple[TrialUnit, ...]:
        return tuple(u for u in self.units if u.unit.role != "router")

    @property
    def router(self) -> TrialUnit:
        return self.units[-1]

    @property
    def endpoint(self) -> str:
        router = self.router.unit
        assert router.port is not None  # launch_units always gives the router a port
        return url(router.address, router.port)

    def gpus_by_host(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for unit in self.engines:
            found.setdefault(unit.host, []).extend(unit.unit.gpu_indices)
        return {host: sorted(gpus) for host, gpus in found.items()}


def trial_labels(
    trial: str, purpose: str, recipe: str, unit: Unit, owner: str | None = None
) -> dict[str, str]:
    """Labels that say what a trial unit is and which process owns it
    (reconciler.trials.owner); never `release`, `stage` or `fleet`."""
    labels = {
        "trial": trial,
        "purpose": purpose,
        "recipe": recipe,
        "role": unit.role,
        "replica": str(unit.replica),
        "node": str(unit.node),
    }
    return labels | ({"owner": owner} if owner else {})


def plan_trial(
    deployment: Deployment,
    fleet: Fleet,
    observation: FleetObservation,
    context: EngineContext,
    domain_size: int,
    purpose: str,
    owner: str | None = None,
    *,
    rules: FleetRules,
) -> TrialPlan:
    """Every unit of the trial, placed on free trial GPUs of the observed hosts, on ports no
    unit there holds, labelled with its `owner` (the deploying process's label); `rules`
    are the fleet's kind's (addresses, the agent's home).
    PlacementError or EngineError when it cannot run."""
    trial = deployment.stage
    # Every unit the agents report holds its GPUs, a release's even when it has exited (the
    # reconciler restarts it in place); only exited units of no release free theirs.
    states = host_states(fleet, observation, keeps=lambda _key: True)
    placement = place_on_trial_gpus(
        deployment, fleet, states, domain_size, rules, TRIAL_BASE_PORT, trial_prefix(trial)
    )
    ports = PortBook()
    for host, seen in observation.hosts.items():
        for record in seen.units:
            if record.port is not None:
                ports.hold(host, record.port, record.id)
        ports.hold_listeners(host, seen, address_of(fleet, rules, host))
    placement = ports.choose(placement, ("trial", trial), None, trial_base_port(trial))
    home = rules.default_home()  # for hosts not observed
    kind = card_of(fleet)
    context = context.model_copy(
        update={
            "base_port": placement.router.port,
            # real engines load the weights the prepare step cached on the host
            "model_path": None if fleet.simulated else kind.model_path(deployment.weights),
        }
    )
    units = launch_units(deployment, fleet, placement, context)
    if kind.ONE_JOB_PER_REPLICA:
        units = one_unit_per_replica(units)
    runtimes = kind.host_runtimes(fleet, context.hardware, observation, home)
    return TrialPlan(
        trial=trial,
        engine=engine_name(deployment, fleet),
        deployment=deployment,
        units=tuple(
            _trial_unit(deployment, unit, runtimes[unit.host], fleet, purpose, owner)
            for unit in units
        ),
    )


def shares_the_agents_user(fleet: Fleet) -> str | None:
    """Why a trial's engine on `fleet` would run as the agent's user (None: it would not):
    a Slurm job runs as the user who submits it, and `trial_user: null` leaves process
    engines with the agent. A simulated fleet runs denv's simulator, a container its own
    filesystem."""
    if fleet.simulated or fleet.runtime == "container":
        return None
    agents = card_of(fleet).AGENTS_USER
    if agents is not None:
        return f"fleet {fleet.name} runs trial engines as {agents}"
    if fleet.trial_user is None:
        return f"fleet {fleet.name} has no trial_user: its trial engines run as the agent's user"
    return None


def _trial_unit(
    deployment: Deployment,
    unit: Unit,
    runtime: Spec,
    fleet: Fleet,
    purpose: str,
    owner: str | None,
) -> TrialUnit:
    trial = deployment.stage
    engine = deployment.recipe.engine
    weights = None if fleet.simulated or unit.role == "router" else deployment.weights
    unit_id = trial_prefix(trial) + unit.name
    kind = card_of(fleet)
    runs = kind.runnable(unit, unit_id, engine.version, engine.image, runtime, weights)
    container = runs.need is not None and runs.need.kind == "container"
    # An engine that is a process of the host (the venv runtime) runs as the fleet's trial
    # user; a container has its own filesystem (the weights mounted read-only), the simulator
    # and the router are denv's own code, and a Slurm job runs as the user who submits it.
    process = runs.need is not None and runs.need.kind == "venv" and unit.role != "router"
    user = fleet.trial_user if process and kind.AGENTS_USER is None else None
    return TrialUnit(
        id=unit_id,
        host=unit.host,
        labels=trial_labels(trial, purpose, deployment.recipe.id, unit, owner),
        unit=runs.unit,
        need=runs.need,
        weights=weights,
        cleanup=runs.cleanup,
        image=runs.need.name if container and runs.need is not None else None,
        user=user,
    )


class ProbeInfo(Spec):
    """What the agents' probe says of the hosts a trial runs on."""

    driver: str | None = None
    runtime: str | None = None  # CUDA or ROCm version
    gpu_names: list[str] = []


def probe_info(plan: TrialPlan, observation: FleetObservation) -> ProbeInfo:
    """Driver, runtime and the names of the GPUs the trial's engines use (each distinct name
    once, in host order); several drivers or runtimes are joined with ', '."""
    drivers: list[str] = []
    runtimes: list[str] = []
    names: list[str] = []
    for host, indices in plan.gpus_by_host().items():
        seen = observation.hosts.get(host)
        if seen is None:
            continue
        if seen.driver and seen.driver not in drivers:
            drivers.append(seen.driver)
        if seen.runtime and seen.runtime not in runtimes:
            runtimes.append(seen.runtime)
        for gpu in seen.gpus:
            if gpu.index in indices and gpu.name and gpu.name not in names:
                names.append(gpu.name)
    return ProbeInfo(
        driver=", ".join(drivers) or None,
        runtime=", ".join(runtimes) or None,
        gpu_names=names,
    )
