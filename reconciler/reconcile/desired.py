"""Pure logic: the desired state — every unit that should run, where, and exactly what.

Each (release, stage, fleet) at the revision its stage runs becomes a Deployment, placed on
its fleet (reconciler.fleet.placement.placer) and turned into the engine's units, each with a
stable id, its labels and the digest the agent compares. What one deployment cannot get
(GPUs, ports, a loadable revision) is reported for that deployment alone; the others are
still planned, and what it runs now is left as it runs. Fleets come from the head revision
(hosts are today's); releases, recipes and model architectures from the commit each stage
reads (`StageRevision.commit`: its pin, or the head for the first stage, whose release
inputs there are its revision's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from reconciler.catalog.deployments import Deployment, deployments
from reconciler.collector import collector_paused
from reconciler.engines.base import url
from reconciler.engines.placement import Placement
from reconciler.engines.units import EngineContext, Unit
from reconciler.errors import DenvError
from reconciler.fleet.kinds.cards import FleetCard, card_of
from reconciler.fleet.launching import HostedUnit, unit_digest
from reconciler.fleet.model.labels import DeploymentKey, fleet_key, unit_id, unit_labels
from reconciler.fleet.model.observed import FleetObservation, UnitRecord
from reconciler.fleet.model.rules import RulesOf
from reconciler.fleet.placement.placer import FleetPlacer
from reconciler.reconcile.pool import StagePools, count_key, counted, pooled
from reconciler.reconcile.revisions import Pending, StageRevision, Stages
from reconciler.spec.base import Spec
from reconciler.spec.checks import domain_size
from reconciler.spec.fleet import Fleet
from reconciler.spec.repo import Repo
from reconciler.spec.scaling import ReplicaBounds, with_replicas

DEFAULT_BASE_PORT = 8000


class DesiredUnit(HostedUnit):
    fleet: str
    digest: str  # unit_digest: what the agent compares to see a changed spec
    replica_gpus: int  # GPUs of the whole replica the unit belongs to; 0 for a router


class DesiredDeployment(Spec):
    release: str
    stage: str
    fleet: str
    revision: str
    recipe: str = ""  # the recipe id it runs (a stage may name one per fleet)
    gpus: int
    replicas: int = 0  # aggregated replicas placed (elastic: the count the bot keeps)
    bounds: ReplicaBounds | None = None  # elastic: git's bounds on the count
    stage_fleets: int = 1  # the fleets of its stage (a stage's pool shares the bounds over them)
    # elastic: replicas the count asks for that did not fit (no free GPU): never counted
    pending_replicas: int = 0
    endpoint: str | None  # the router's URL
    units: tuple[DesiredUnit, ...]  # engines in placement order, router last

    @property
    def fleet_bounds(self) -> ReplicaBounds | None:
        """What this fleet keeps of the bounds (a stage's pool: from one replica)."""
        return self.bounds.on_fleet(self.stage_fleets) if self.bounds is not None else None

    @property
    def key(self) -> DeploymentKey:
        return self.release, self.stage, self.fleet


class DeploymentError(Spec):
    """Why a stage, or one deployment of it, was not planned; what it runs is left alone."""

    release: str
    stage: str | None  # None: every stage of the release (its file is invalid)
    fleet: str | None  # None: every fleet of the stage
    revision: str | None
    message: str

    def covers(self, key: DeploymentKey) -> bool:
        return (
            self.release == key[0] and self.stage in (None, key[1]) and self.fleet in (None, key[2])
        )

    @property
    def where(self) -> str:
        """'release / stage', or the release alone when every stage is held."""
        return self.release if self.stage is None else f"{self.release} / {self.stage}"


class FleetCapacity(Spec):
    fleet: str
    gpus: int  # observed GPUs, or declared ones where the fleet was not observed
    trial_gpus: int
    observed: bool
    unreachable: dict[str, str] = {}  # host -> why it was not observed
    room: dict[int, bool] = {}  # replica GPUs -> whether one more fits beside the plan


class Desired(Spec):
    head: str
    deployments: tuple[DesiredDeployment, ...] = ()
    errors: tuple[DeploymentError, ...] = ()
    pending: tuple[Pending, ...] = ()
    fleets: dict[str, FleetCapacity] = {}
    # Fleets whose file says `prune: true`: units of deployments nothing wants (orphans,
    # reconcile/orphans.py) are stopped there; elsewhere they are shown and left running.
    prune: frozenset[str] = frozenset()


class _Resolved(NamedTuple):
    inputs: tuple[object, ...]
    units: list[Unit]
    desired: DesiredDeployment


class DesiredMemo:
    """Across the passes of a running loop: each deployment as last resolved, with the inputs
    it came from. One whose inputs are equal this pass (its release and recipe, placement,
    engine context and revision; its fleet and the hosts' runtimes) gets its units back
    instead of building them again, so the steady state costs a comparison per deployment;
    any difference builds it afresh. In memory only: a new process starts empty."""

    def __init__(self) -> None:
        self._fleets: dict[str, tuple[object, ...]] = {}
        self._resolved: dict[DeploymentKey, _Resolved] = {}

    def fleet(self, name: str, inputs: tuple[object, ...]) -> None:
        """This pass's inputs of the whole fleet; when they differ, its entries are dropped."""
        if self._fleets.get(name) != inputs:
            self._resolved = {k: v for k, v in self._resolved.items() if k[2] != name}
            self._fleets[name] = inputs

    def get(self, key: DeploymentKey, inputs: tuple[object, ...]) -> _Resolved | None:
        found = self._resolved.get(key)
        return found if found is not None and found.inputs == inputs else None

    def put(self, key: DeploymentKey, resolved: _Resolved) -> None:
        self._resolved[key] = resolved

    def keep(self, keys: set[DeploymentKey]) -> None:
        """Forget deployments that were not resolved this pass (removed, failed)."""
        self._resolved = {k: v for k, v in self._resolved.items() if k in keys}


class _Lookup:
    """`known` for FleetPlacer.add: the memo's units for the placement it chose, keeping
    what it asked with and what it found."""

    def __init__(self, memo: DesiredMemo, key: DeploymentKey, given: tuple[object, ...]):
        self.memo, self.key, self.given = memo, key, given
        self.inputs: tuple[object, ...] = given
        self.hit: _Resolved | None = None

    def __call__(self, placement: Placement) -> list[Unit] | None:
        self.inputs = (*self.given, placement)
        self.hit = self.memo.get(self.key, self.inputs)
        return self.hit.units if self.hit is not None else None


def observed_units(
    observations: Mapping[str, FleetObservation],
) -> dict[str, dict[str, tuple[UnitRecord, ...]]]:
    """fleet -> host -> unit records: what `plan` compares the desired state with (the
    routers that answer on hosts not reached too: they are kept as they run)."""
    return {
        fleet: {host: seen.units for host, seen in found.hosts.items()} | found.answering
        for fleet, found in observations.items()
    }


def fleets_of(stages: Stages, repo_at: Callable[[str], Repo]) -> set[str]:
    """The fleets the running stages use: the only fleets a plan needs to observe."""
    names: set[str] = set()
    for stage in stages.running:
        try:
            release = repo_at(stage.commit).releases.get(stage.release)
        except DenvError:
            continue  # desired_units reports it
        for spec in release.stages if release is not None else []:
            if spec.name == stage.stage:
                names.update(spec.fleets)
    return names


Wanted = tuple[Deployment, StageRevision, Repo]
Counts = Mapping[DeploymentKey, int]  # elastic deployments: the replica count to run


def asked_counts(desired: Desired) -> dict[DeploymentKey, int]:
    """The replicas each elastic deployment, or stage pool, asks for in `desired` (placed and
    pending): what the autoscaler's counts are compared with."""
    elastic = [d for d in desired.deployments if d.bounds is not None]
    return counted((d, d.replicas + d.pending_replicas) for d in elastic)


def running_replicas(observations: Mapping[str, FleetObservation]) -> dict[DeploymentKey, int]:
    """How many aggregated replicas each deployment has on its fleet now (started, starting,
    or a job the scheduler holds; not a job that ended, which the queue remembers a while
    after a scale-down cancelled it): an elastic stage's count, read from the fleets, so that
    a bot that restarts carries on from the count it left."""
    replicas: dict[DeploymentKey, set[str]] = {}
    for name, found in observations.items():
        for seen in found.hosts.values():
            for record in seen.units:
                key = fleet_key(record, name)
                aggregated = record.labels.get("role") == "aggregated"
                if key is not None and aggregated and not record.ended_job:
                    replicas.setdefault(key, set()).add(record.labels.get("replica", ""))
    return {key: len(indices) for key, indices in replicas.items()}


def desired_units(
    stages: Stages,
    repo_at: Callable[[str], Repo],
    observations: Mapping[str, FleetObservation],
    rules: RulesOf,
    base_port: int = DEFAULT_BASE_PORT,
    memo: DesiredMemo | None = None,
    counts: Counts | None = None,
) -> Desired:
    """Every unit the running stages want, placed. `repo_at(commit)` loads a revision (it
    raises DenvError when the revision cannot be used); fleets without an observation are
    planned on their hosts as declared. `rules(fleet)` says what the fleet's kind decides:
    addresses, the agent's home, the interpreter units run with. `memo`, kept by a running
    loop, spares building again what the last pass built from the same inputs. An elastic
    deployment runs `counts[key]` replicas, else as many as run now, within its bounds; those
    that do not fit are pending (the deployment runs the others)."""
    chosen = dict(running_replicas(observations))
    chosen.update(counts or {})
    with collector_paused():  # half of a resolution at 10,000 units (docs/performance.md)
        found = _desired_units(stages, repo_at, observations, rules, base_port, memo, chosen)
    if memo is not None:
        memo.keep({d.key for d in found.deployments})
    return found


def _desired_units(
    stages: Stages,
    repo_at: Callable[[str], Repo],
    observations: Mapping[str, FleetObservation],
    rules: RulesOf,
    base_port: int,
    memo: DesiredMemo | None,
    counts: Counts,
) -> Desired:
    memo = memo if memo is not None else DesiredMemo()  # one pass's own, then dropped
    head = repo_at(stages.head)
    wanted, errors = _resolve(stages, repo_at)
    errors += _held_releases(head)
    protected = {(d.release, d.stage, d.fleet) for d, _, _ in wanted}
    stage_errors = [e for e in errors if e.fleet is None]
    prune = frozenset(name for name, fleet in head.fleets.items() if fleet.prune)

    def keeps(key: DeploymentKey) -> bool:
        """Whether what runs of `key` keeps its GPUs: a wanted deployment's, one that failed
        to plan, and an orphan where its fleet does not prune (it is left running)."""
        if key in protected or any(e.covers(key) for e in stage_errors):
            return True
        return key[2] not in prune

    planned: list[DesiredDeployment] = []
    fleets: dict[str, FleetCapacity] = {}
    by_fleet: dict[str, list[Wanted]] = {}
    for item in wanted:
        by_fleet.setdefault(item[0].fleet, []).append(item)
    # the cheapest fleets first: a stage's pool adds replicas there while they have room
    pools = StagePools(head, [d for d, _, _ in wanted], counts)
    for name in pools.order(by_fleet):
        items = by_fleet[name]
        fleet = head.fleets.get(name)
        hardware = head.resolve_hardware(fleet.hardware) if fleet is not None else None
        if fleet is None or hardware is None:
            why = f"no fleet {name}" if fleet is None else f"unknown hardware of fleet {name}"
            why = _held(head, f"fleet:{name}") or f"{why} at the head revision"
            errors += [_error(s, name, why) for _, s, _ in items]
            continue
        observation = observations.get(name)
        size = domain_size(head, name) or 1
        kind = rules(fleet)
        placer = FleetPlacer(fleet, size, observation, keeps, base_port, kind)
        home = kind.default_home()  # for hosts not observed
        fleet_card = card_of(fleet)
        runtimes = fleet_card.host_runtimes(fleet, hardware, observation, home)
        memo.fleet(name, (fleet, runtimes))
        sizes: set[int] = set()
        # fixed counts first: an elastic deployment's replicas beyond what they need never
        # take the GPUs a fixed one must have (it gets fewer, the rest pending)
        ordered = sorted(items, key=lambda item: item[0].bounds is not None)
        for index, (deployment, stage, repo) in enumerate(ordered):
            # nor those the elastic ones placed after it need for their minimum
            later = [minimum(d) for d, _, _ in ordered[index + 1 :] if d.bounds is not None]
            context = EngineContext(
                hardware=hardware,
                model=repo.models.get(deployment.recipe.model),
                python=kind.python,
                engine_python=kind.python,
                base_port=base_port,
                # real engines load the weights the prepare step cached on the host
                model_path=None if fleet.simulated else fleet_card.model_path(deployment.weights),
            )
            key = (deployment.release, deployment.stage, deployment.fleet)
            count = pools.asks(deployment) if pooled(deployment) else counts.get(key)
            try:
                placed, pending = _place(
                    placer, deployment, context, stage.revision, count, memo, later
                )
                if pooled(deployment):  # what did not fit here goes to the next fleet
                    pools.placed(deployment, aggregated(placed.deployment))
                    pending = 0
                hit = placed.hit
                if hit is None:
                    units = placed.units
                    built = _deployment(
                        placed.deployment, stage, units, runtimes, fleet, fleet_card
                    )
                    hit = _Resolved(placed.inputs, units, built)
                    memo.put(key, hit)
                desired = hit.desired
                if pending:
                    desired = desired.model_copy(update={"pending_replicas": pending})
                planned.append(desired)
            except DenvError as exc:
                errors.append(_error(stage, name, _unplaced(str(exc), name, observation)))
                continue
            sizes |= {u.replica_gpus for u in planned[-1].units if u.replica_gpus}
        fleets[name] = FleetCapacity(
            fleet=name,
            gpus=placer.gpus,
            trial_gpus=fleet.trial_gpus,
            observed=observation is not None,
            unreachable=dict(observation.errors) if observation is not None else {},
            room=placer.room(sizes),
        )
    return Desired(
        head=stages.head,
        deployments=_pending_pools(planned, pools.unplaced()),
        errors=tuple(errors),
        pending=stages.pending,
        fleets=fleets,
        prune=prune,
    )


def _pending_pools(
    planned: list[DesiredDeployment], unplaced: Mapping[DeploymentKey, int]
) -> tuple[DesiredDeployment, ...]:
    """`planned` (the cheapest fleets first) in the fleets' order, each stage pool's replicas
    that fit nowhere shown as pending on its dearest fleet."""
    found = list(planned)
    for key, count in unplaced.items():
        mine = [i for i, d in enumerate(found) if pooled(d) and count_key(d) == key]
        if mine:
            found[mine[-1]] = found[mine[-1]].model_copy(update={"pending_replicas": count})
    return tuple(sorted(found, key=lambda d: d.fleet))


class _Placed(NamedTuple):
    deployment: Deployment  # at the count placed
    units: list[Unit]
    hit: _Resolved | None
    inputs: tuple[object, ...]


def _place(
    placer: FleetPlacer,
    deployment: Deployment,
    context: EngineContext,
    revision: str,
    count: int | None,
    memo: DesiredMemo,
    reserved: list[Deployment],
) -> tuple[_Placed, int]:
    """The deployment placed; an elastic one at `count` (kept within its bounds), else at
    as many replicas as fit down to its minimum, leaving room for every deployment of
    `reserved` (the minimum of those placed after it): the rest is pending. PlacementError
    when not even the minimum (or the fixed count) fits."""
    bounds = deployment.fleet_bounds
    wanted = bounds.clamp(count if count else bounds.min) if bounds is not None else 0
    tries = range(wanted, bounds.min - 1, -1) if bounds is not None else [0]
    key = (deployment.release, deployment.stage, deployment.fleet)
    for replicas in tries:
        sized = at_count(deployment, replicas) if replicas else deployment
        above_minimum = bounds is not None and replicas > bounds.min
        if above_minimum and reserved and not placer.fits_beside([sized, *reserved]):
            continue
        lookup = _Lookup(memo, key, (sized, context, revision))
        try:
            grow = bounds.max - replicas if bounds is not None else 0
            units = placer.add(sized, context, lookup, grow)
        except DenvError:
            if replicas <= (bounds.min if bounds is not None else 0):
                raise
            continue
        return _Placed(
            sized, units, lookup.hit, lookup.inputs
        ), wanted - replicas if replicas else 0
    raise AssertionError("unreachable: the last try raises")


def aggregated(deployment: Deployment) -> int:
    """The aggregated replicas of a deployment's topology."""
    pools = deployment.recipe.topology.pools()
    return sum(pool.replicas for role, pool in pools if role == "aggregated")


def at_count(deployment: Deployment, replicas: int) -> Deployment:
    """An elastic deployment at `replicas` replicas."""
    topology = with_replicas(deployment.recipe.topology, replicas)
    return deployment.model_copy(
        update={"recipe": deployment.recipe.model_copy(update={"topology": topology})}
    )


def minimum(deployment: Deployment) -> Deployment:
    assert deployment.fleet_bounds is not None
    return at_count(deployment, deployment.fleet_bounds.min)


def _resolve(
    stages: Stages, repo_at: Callable[[str], Repo]
) -> tuple[list[Wanted], list[DeploymentError]]:
    """Each running stage's deployments at its own revision."""
    wanted: list[Wanted] = []
    errors: list[DeploymentError] = []
    resolved: dict[str, dict[tuple[str, str], list[Deployment]]] = {}
    for stage in stages.running:
        try:
            repo = repo_at(stage.commit)
        except DenvError as exc:
            errors.append(_error(stage, None, str(exc)))
            continue
        if held := _held(repo, f"release:{stage.release}"):
            errors.append(_error(stage, None, held))
            continue
        if stage.commit not in resolved:
            index: dict[tuple[str, str], list[Deployment]] = {}
            for found in deployments(repo):
                index.setdefault((found.release, found.stage), []).append(found)
            resolved[stage.commit] = index
        mine = resolved[stage.commit].get((stage.release, stage.stage), [])
        if not mine:
            message = f"no stage {stage.stage} in release {stage.release}"
            errors.append(_error(stage, None, f"{message} at revision {stage.revision[:12]}"))
        wanted += [(d, stage, repo) for d in mine]
    return wanted, errors


def _deployment(
    deployment: Deployment,
    stage: StageRevision,
    units: list[Unit],
    runtimes: Mapping[str, Spec],
    fleet: Fleet,
    fleet_card: FleetCard,
) -> DesiredDeployment:
    key = (deployment.release, deployment.stage, deployment.fleet)
    sizes = {role: pool.gpus for role, pool in deployment.recipe.topology.pools()}
    engine = deployment.recipe.engine
    wanted = []
    for unit in units:
        weights = None if fleet.simulated or unit.role == "router" else deployment.weights
        runs = fleet_card.runnable(
            unit,
            unit_id(*key, unit.name),
            engine.version,
            engine.image,
            runtimes[unit.host],
            weights,
        )
        container = runs.need is not None and runs.need.kind == "container"
        wanted.append(
            DesiredUnit(
                id=unit_id(*key, unit.name),
                fleet=deployment.fleet,
                host=unit.host,
                digest=unit_digest(runs.unit),
                labels=unit_labels(key, stage.revision, unit),
                replica_gpus=0 if unit.role == "router" else sizes.get(unit.role, unit.gpus),
                unit=runs.unit,
                need=runs.need,
                weights=weights,
                cleanup=runs.cleanup,
                image=runs.need.name if container and runs.need is not None else None,
                gpu_scope=f"{fleet.name}.{unit.host}" if fleet.simulated else None,
            )
        )
    router = next((u for u in units if u.role == "router" and u.port is not None), None)
    return DesiredDeployment(
        release=deployment.release,
        stage=deployment.stage,
        fleet=deployment.fleet,
        revision=stage.revision,
        recipe=deployment.recipe.id,
        gpus=deployment.gpus,
        replicas=aggregated(deployment),
        bounds=deployment.bounds,
        stage_fleets=deployment.stage_fleets,
        endpoint=url(router.address, router.port) if router and router.port else None,
        units=tuple(wanted),
    )


def _unplaced(why: str, fleet: str, observation: FleetObservation | None) -> str:
    """Why a deployment was not placed: hosts that did not answer first, they are the reason
    (their GPUs were left out, not found missing)."""
    if observation is None or not observation.errors:
        return why
    if not observation.hosts:
        return f"no host of {fleet} answered: {observation.unreached()}"
    return f"{why}; hosts not reached (their GPUs left out): {observation.unreached()}"


def _error(stage: StageRevision, fleet: str | None, message: str) -> DeploymentError:
    return DeploymentError(
        release=stage.release,
        stage=stage.stage,
        fleet=fleet,
        revision=stage.revision,
        message=message,
    )


def _held(repo: Repo, key: str) -> str:
    """Why `key` ('release:<name>', 'fleet:<name>') is held in `repo` (an invalid file,
    spec/isolation.py; what it runs is left as it runs); '' when it is not."""
    problems = repo.held.get(key, ())
    if not problems:
        return ""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"held, an invalid file: {problems[0]}{more}"


def _held_releases(head: Repo) -> list[DeploymentError]:
    """An error for every release an invalid file holds at the head: it covers each of its
    stages, so what they run is left as it runs."""
    return [
        DeploymentError(
            release=key.removeprefix("release:"),
            stage=None,
            fleet=None,
            revision=None,
            message=_held(head, key),
        )
        for key in sorted(head.held)
        if key.startswith("release:")
    ]
