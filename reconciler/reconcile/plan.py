"""Pure logic: the plan — the desired units paired with the units the agents report, as a
sorted tuple of actions: start, stop, replace (rolling) and keep.

Only units the reconciler started are ever touched: a unit record whose labels name a release,
stage and fleet. Records without those labels (bench runs, optimizer trials) and processes
with no record at all are left alone. A labelled record of a wanted deployment that no wanted
unit matches is stopped, unless its deployment failed to plan (then everything of it is left as
it runs). One whose deployment the desired state does not have at all is an orphan
(reconcile/orphans.py): shown, and stopped only where its fleet's file says `prune: true`.

Waves say what must be done before what: stops of what nothing wants free GPUs and ports
that new units were placed on, so they come first; starts next; then rolling replaces; stops of
what wanted deployments no longer need (a scale-down) last, after their routers were updated.
Within a wave, actions are grouped by release, stage and fleet; engines start before their
router and stop after it; replaces go replica by replica.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import IntEnum, StrEnum

from pydantic import computed_field

from reconciler.fleet.model.labels import DeploymentKey, record_key
from reconciler.fleet.model.observed import UnitRecord
from reconciler.reconcile.changes import Change, unit_changes
from reconciler.reconcile.desired import DeploymentError, Desired, DesiredUnit
from reconciler.reconcile.orphans import Orphan, orphan
from reconciler.reconcile.pool import count_key, counted, pooled
from reconciler.reconcile.revisions import Pending
from reconciler.spec.base import Spec
from reconciler.spec.scaling import ReplicaBounds

ObservedUnits = Mapping[str, Mapping[str, Sequence[UnitRecord]]]  # fleet -> host -> records


class ActionKind(StrEnum):
    START = "start"
    STOP = "stop"
    REPLACE = "replace"
    KEEP = "keep"


class Wave(IntEnum):
    NONE = 0  # keep: nothing to do
    FREE = 1  # stop units nothing wants: new units may be placed on their GPUs and ports
    START = 2  # start units: engines, then routers
    ROLL = 3  # rolling replace, replica by replica, routers last
    TRIM = 4  # stop what a wanted deployment no longer needs (scale-down, a moved unit)


class Action(Spec):
    kind: ActionKind
    wave: Wave
    release: str
    stage: str
    fleet: str
    host: str
    unit: str  # the unit id on its host
    role: str
    replica: int
    node: int
    reason: str
    changes: tuple[Change, ...] = ()  # replace (and a restart with a new spec): what differs
    # replace of a replica: whether free GPUs (not trial GPUs) hold the new one beside the old;
    # None for a router, which keeps its port and is replaced in place
    surge: bool | None = None
    gpus_before: tuple[int, ...] = ()
    gpus_after: tuple[int, ...] = ()
    port: int | None = None  # the port it will listen on (stop: the one it listens on)
    desired: DesiredUnit | None = None  # what to launch: start, replace, keep
    running: UnitRecord | None = None  # what runs now: stop, replace, keep, restart


class Group(Spec):
    """One (release, stage, fleet): what it should run and what it runs."""

    release: str
    stage: str
    fleet: str
    revision: str | None  # desired; None when nothing is wanted any more
    running_revisions: tuple[str, ...] = ()  # revisions the running units were started from
    gpus_before: int = 0
    gpus_after: int = 0
    endpoint: str | None = None
    error: str | None = None  # why it was not planned (what runs is left alone)
    replicas: int = 0  # aggregated replicas wanted (elastic: the count the bot keeps)
    bounds: ReplicaBounds | None = None  # elastic: git's bounds on the count
    pending_replicas: int = 0  # elastic: asked for, no free GPU: never counted
    pool_replicas: int | None = None  # a stage's pool: its replicas on all the stage's fleets
    orphaned: bool = False  # not wanted; left running (its fleet does not prune)

    @property
    def scale(self) -> str | None:
        """'4 (1–8)', '+2 pending' when capacity did not arrive; None for a fixed count."""
        if self.bounds is None:
            return None
        pending = f", {self.pending_replicas} pending" if self.pending_replicas else ""
        return self.bounds.describe(self.replicas, self.pool_replicas) + pending


class FleetUsage(Spec):
    fleet: str
    gpus: int | None  # None: the fleet was not part of the desired state
    trial_gpus: int | None
    before: int  # GPUs that units of releases hold now
    after: int
    observed: bool = True
    unreachable: dict[str, str] = {}


class Plan(Spec):
    head: str
    actions: tuple[Action, ...] = ()
    groups: tuple[Group, ...] = ()
    fleets: tuple[FleetUsage, ...] = ()
    pending: tuple[Pending, ...] = ()
    errors: tuple[DeploymentError, ...] = ()
    orphans: tuple[Orphan, ...] = ()  # units denv started that nothing wants (orphans.py)
    # A local work tree's paths that differ from the commit planned (`denv plan` of HEAD), and
    # the errors of those files as they stand: the plan leaves them out.
    uncommitted: tuple[str, ...] = ()
    uncommitted_errors: tuple[str, ...] = ()
    # The default branch's invalid files at the head, each with what it holds (the rest is
    # planned: spec/isolation.py).
    invalid_files: tuple[str, ...] = ()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def counts(self) -> dict[str, int]:
        found = {kind.value: 0 for kind in ActionKind}
        for action in self.actions:
            found[action.kind.value] += 1
        return found

    @computed_field  # type: ignore[prop-decorator]
    @property
    def unreachable(self) -> int:
        """Hosts of the observed fleets that did not answer: the plan cannot be complete."""
        return sum(len(usage.unreachable) for usage in self.fleets)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def empty(self) -> bool:
        """Nothing to start, stop or replace."""
        return all(action.kind == ActionKind.KEEP for action in self.actions)

    def group_actions(self, group: Group) -> list[Action]:
        key = (group.release, group.stage, group.fleet)
        return [a for a in self.actions if (a.release, a.stage, a.fleet) == key]

    @property
    def left(self) -> tuple[Orphan, ...]:
        """The orphans left running (their fleet does not prune)."""
        return tuple(o for o in self.orphans if not o.prune)


def plan(desired: Desired, observed: ObservedUnits) -> Plan:
    """The actions that make `observed` (fleet -> host -> unit records) what `desired` says."""
    running: dict[tuple[str, str], list[tuple[str, UnitRecord]]] = {}
    by_key: dict[DeploymentKey, list[UnitRecord]] = {}
    for fleet, hosts in observed.items():
        for host, records in hosts.items():
            for record in records:
                key = record_key(record)
                if key is None or key[2] != fleet:
                    continue  # not the reconciler's, or another fleet's on a shared machine
                running.setdefault((fleet, record.id), []).append((host, record))
                by_key.setdefault(key, []).append(record)
    actions: list[Action] = []
    for deployment in desired.deployments:
        capacity = desired.fleets.get(deployment.fleet)
        room = capacity.room if capacity is not None else {}
        for unit in deployment.units:
            found = running.pop((unit.fleet, unit.id), [])
            match = _match(found, unit.host)
            actions.append(_pair(unit, match, room))
            for host, record in found:
                if record.ended_job:
                    continue  # nothing runs to stop
                if match is None or record is not match[1]:
                    why = f"{unit.id} runs on {unit.host}" + (" now" if match is None else "")
                    actions.append(_stop(record, host, Wave.TRIM, why))
    stops, orphans = _leftovers(desired, running)
    actions += stops
    actions.sort(key=_order)
    groups = _groups(desired, by_key)
    return Plan(
        head=desired.head,
        actions=tuple(actions),
        groups=groups,
        fleets=_fleets(desired, groups),
        pending=desired.pending,
        errors=desired.errors,
        orphans=tuple(sorted(orphans, key=lambda o: (*o.key, o.host, o.unit))),
    )


def _match(found: list[tuple[str, UnitRecord]], host: str) -> tuple[str, UnitRecord] | None:
    """The record on the unit's own host, a live one first."""
    here = [item for item in found if item[0] == host]
    return next((item for item in here if item[1].alive), here[0] if here else None)


def _base(unit: DesiredUnit, kind: ActionKind, wave: Wave, reason: str) -> dict[str, object]:
    labels = unit.labels
    return {
        "kind": kind,
        "wave": wave,
        "release": labels["release"],
        "stage": labels["stage"],
        "fleet": labels["fleet"],
        "host": unit.host,
        "unit": unit.id,
        "role": unit.unit.role,
        "replica": unit.unit.replica,
        "node": unit.unit.node,
        "reason": reason,
        "gpus_after": tuple(unit.unit.gpu_indices),
        "port": unit.unit.port,
        "desired": unit,
    }


def _pair(
    unit: DesiredUnit, match: tuple[str, UnitRecord] | None, room: Mapping[int, bool]
) -> Action:
    if match is None:
        return Action.model_validate(_base(unit, ActionKind.START, Wave.START, "new"))
    record = match[1]
    before = {"running": record, "gpus_before": tuple(record.gpus)}
    if record.pending and record.digest == unit.digest:  # a job the scheduler has not started
        why = f"pending: {record.queue_reason or 'queued'}"
        return Action.model_validate({**_base(unit, ActionKind.KEEP, Wave.NONE, why), **before})
    if record.digest == unit.digest:
        if record.alive:
            return Action.model_validate(
                {**_base(unit, ActionKind.KEEP, Wave.NONE, "up to date"), **before}
            )
        why = _exited(record) + "; start it again"
        return Action.model_validate({**_base(unit, ActionKind.START, Wave.START, why), **before})
    changes = tuple(unit_changes(record, unit.unit))
    if not record.alive:  # a pending job too: its spec changes before it starts
        why = _exited(record) + "; start it with the new spec"
        fields = {**_base(unit, ActionKind.START, Wave.START, why), **before, "changes": changes}
        return Action.model_validate(fields)
    surge = room.get(unit.replica_gpus, False) if unit.replica_gpus else None
    fields = {
        **_base(unit, ActionKind.REPLACE, Wave.ROLL, "spec changed"),
        **before,
        "changes": changes,
        "surge": surge,
    }
    return Action.model_validate(fields)


def _exited(record: UnitRecord) -> str:
    if record.queue is not None:  # a scheduler's job: what the scheduler says of it
        if record.pending:
            return f"job {record.job} pending ({record.queue_reason or 'queued'})"
        return f"job {record.job} ended: {record.queue}"
    return "exited" + (f" with code {record.exit_code}" if record.exit_code is not None else "")


def _stop(record: UnitRecord, host: str, wave: Wave, reason: str) -> Action:
    labels = record.labels
    return Action(
        kind=ActionKind.STOP,
        wave=wave,
        release=labels["release"],
        stage=labels["stage"],
        fleet=labels["fleet"],
        host=host,
        unit=record.id,
        role=labels.get("role", ""),
        replica=_int(labels.get("replica")),
        node=_int(labels.get("node")),
        reason=reason,
        gpus_before=tuple(record.gpus),
        port=record.port,
        running=record,
    )


def _int(text: str | None) -> int:
    return int(text) if text is not None and text.isdigit() else 0


def _leftovers(
    desired: Desired, running: Mapping[tuple[str, str], list[tuple[str, UnitRecord]]]
) -> tuple[list[Action], list[Orphan]]:
    """Stops for labelled records no wanted unit matched, except where planning failed; those
    of deployments nothing wants are orphans, stopped too where their fleet prunes."""
    wanted = {d.key for d in desired.deployments}
    releases = {d.release for d in desired.deployments}
    releases |= {e.release for e in desired.errors} | {p.release for p in desired.pending}
    pending = {(p.release, p.stage) for p in desired.pending}
    covered: dict[DeploymentKey, bool] = {}
    stops, orphans = [], []
    for found in running.values():
        for host, record in found:
            key = record_key(record)
            assert key is not None  # only labelled records were collected
            if key not in covered:
                covered[key] = any(error.covers(key) for error in desired.errors)
            if covered[key] or record.ended_job:
                continue
            release, stage, fleet = key
            if key in wanted:
                stops.append(_stop(record, host, Wave.TRIM, "no longer part of the deployment"))
                continue
            if release not in releases:
                why = f"release {release} was removed"
            elif (release, stage) in pending:
                why = f"stage {stage} is not deployed"
            else:
                why = f"stage {stage} of {release} no longer runs on {fleet}"
            prune = fleet in desired.prune
            orphans.append(orphan(record, host, why, prune))
            if prune:
                stops.append(_stop(record, host, Wave.FREE, f"{why}; orphan, pruned"))
    return stops, orphans


_ROLES = {"prefill": 0, "decode": 1, "aggregated": 2}


def _order(action: Action) -> tuple[str, str, str, int, int, int, int, str, str]:
    engine = _ROLES.get(action.role, 3)
    if action.kind == ActionKind.STOP:
        rank = 0 if action.role == "router" else 1 + engine  # routers stop first
    else:
        rank = 9 if action.role == "router" else engine  # routers start (and roll) last
    wave = 9 if action.kind == ActionKind.KEEP else int(action.wave)
    return (
        action.release,
        action.stage,
        action.fleet,
        wave,
        rank,
        action.replica,
        action.node,
        action.host,
        action.unit,
    )


def _groups(
    desired: Desired, by_key: Mapping[DeploymentKey, list[UnitRecord]]
) -> tuple[Group, ...]:
    wanted = {d.key: d for d in desired.deployments}
    keys = set(wanted) | set(by_key)
    keys |= {
        (e.release, e.stage, e.fleet)
        for e in desired.errors
        if e.stage is not None and e.fleet is not None
    }
    pools = counted((d, d.replicas) for d in desired.deployments if pooled(d))
    groups = []
    for key in sorted(keys):
        records = [r for r in by_key.get(key, []) if r.alive]
        before = sum(len(r.gpus) for r in records)
        error = next((e for e in desired.errors if e.covers(key)), None)
        deployment = wanted.get(key)
        orphaned = deployment is None and error is None and key[2] not in desired.prune
        if deployment is not None:
            after = sum(len(u.unit.gpu_indices) for u in deployment.units)
        else:
            after = before if error is not None or orphaned else 0
        revision = deployment.revision if deployment is not None else None
        if error is not None:
            revision = error.revision
        groups.append(
            Group(
                release=key[0],
                stage=key[1],
                fleet=key[2],
                revision=revision,
                running_revisions=tuple(
                    sorted({r.labels.get("revision", "") for r in records} - {""})
                ),
                gpus_before=before,
                gpus_after=after,
                endpoint=deployment.endpoint if deployment is not None else None,
                error=error.message if error is not None else None,
                replicas=deployment.replicas if deployment is not None else 0,
                bounds=deployment.bounds if deployment is not None else None,
                pending_replicas=deployment.pending_replicas if deployment is not None else 0,
                pool_replicas=pools.get(count_key(deployment))
                if deployment is not None and pooled(deployment)
                else None,
                orphaned=orphaned,
            )
        )
    return tuple(groups)


def _fleets(desired: Desired, groups: Sequence[Group]) -> tuple[FleetUsage, ...]:
    usages = []
    for name in sorted(set(desired.fleets) | {g.fleet for g in groups}):
        capacity = desired.fleets.get(name)
        mine = [g for g in groups if g.fleet == name]
        usages.append(
            FleetUsage(
                fleet=name,
                gpus=capacity.gpus if capacity is not None else None,
                trial_gpus=capacity.trial_gpus if capacity is not None else None,
                before=sum(g.gpus_before for g in mine),
                after=sum(g.gpus_after for g in mine),
                observed=capacity.observed if capacity is not None else True,
                unreachable=capacity.unreachable if capacity is not None else {},
            )
        )
    return tuple(usages)
