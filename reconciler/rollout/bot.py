"""Adapter: the rollout bot, run by the reconciler after each pass — readiness and alarms of
every stage, one step of each stage's state machine (stages.py), then the pull requests it
calls for: a rollback PR (rollback.py); a promotion PR for the next stage, merged once its
gate is met, or closed when stale (promote.py).

Its state is kept with the reconciler's lease note (the `checks` hook), so it survives
`--once` runs and a restarted bot; git stays the record of what runs where.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from reconciler.engines.units import Unit
from reconciler.errors import DenvError
from reconciler.forge.protocol import Forge
from reconciler.forge.sweep import sweep
from reconciler.reconcile import probes
from reconciler.reconcile.desired import DesiredDeployment
from reconciler.reconcile.plan import Action, ActionKind, Wave
from reconciler.reconcile.snapshot import Snapshot
from reconciler.rollout.evidence import alarm_value
from reconciler.rollout.promote import Promoter
from reconciler.rollout.revisions import Revisions, rejected_for, rejected_in, stage_runs
from reconciler.rollout.rollback import Rollbacks
from reconciler.rollout.series import ROUTERS, at_routers
from reconciler.rollout.stages import step
from reconciler.rollout.state import AlarmValue, Phase, RolloutState, StageFacts, StageRecord
from reconciler.rollout.watch import AlarmWatch, metrics_targets
from reconciler.spec.policy import stage_alarms, watched_alarms
from reconciler.spec.release import Release, Stage


def stage_ready(snap: Snapshot, deployments: list[DesiredDeployment], fleets: list[str]) -> bool:
    """Every fleet of the stage has its deployment, the plan left it as it is, and every
    replica answers its readiness probe: warm, not merely launched. An elastic deployment's
    replicas beyond its minimum come and go with the traffic: starting or stopping one is not
    a change of what the stage runs (the bake goes on), and they are not waited for."""
    if sorted(d.fleet for d in deployments) != sorted(fleets):
        return False
    by_key = {d.key: d for d in deployments}
    if any(
        a.kind != ActionKind.KEEP and not _scaling(a, by_key.get((a.release, a.stage, a.fleet)))
        for a in snap.plan.actions
        if (a.release, a.stage, a.fleet) in by_key
    ):
        return False
    return all(
        probes.is_ready(u.unit) for d in deployments for u in d.units if not _extra(d, u.unit)
    )


def _extra(deployment: DesiredDeployment, unit: Unit) -> bool:
    """A replica an elastic deployment runs beyond its minimum."""
    bounds = deployment.fleet_bounds
    return bounds is not None and unit.role == "aggregated" and unit.replica >= bounds.min


def _scaling(action: Action, deployment: DesiredDeployment | None) -> bool:
    """A start of a new replica, or the stop of one no longer wanted, beyond the minimum of
    an elastic deployment: the autoscaler's, not a change of revision."""
    if deployment is None or deployment.fleet_bounds is None or action.role != "aggregated":
        return False
    if action.replica < deployment.fleet_bounds.min:
        return False
    started = action.kind == ActionKind.START and action.running is None
    return started or (action.kind == ActionKind.STOP and action.wave == Wave.TRIM)


class RolloutBot:
    def __init__(
        self,
        revisions: Revisions,
        forge: Callable[[], Forge],
        say: Callable[[str], None] = lambda message: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.revisions = revisions
        self._open_forge = forge
        self._forge: Forge | None = None
        self.say = say
        self.clock = clock

    def forge(self) -> Forge:
        if self._forge is None:
            self._forge = self._open_forge()
        return self._forge

    def check(
        self, snap: Snapshot, previous: dict[str, Any], parity: dict[str, Any]
    ) -> dict[str, Any]:
        """One pass of the rollout: the state to keep."""
        now = self.clock()
        self._sweep(snap)  # before any step that reads what the bot remembers
        state = RolloutState.model_validate(previous or {})
        policies = snap.repo.policies
        prometheus = policies.prometheus.url if policies.prometheus is not None else None
        watch = AlarmWatch(
            watched_alarms(policies), state=state.alarms or None, prometheus=prometheus
        )
        kept = RolloutState(
            rejected=dict(state.rejected),
            rejected_on={k: list(v) for k, v in state.rejected_on.items()},
        )
        rollbacks = Rollbacks(self.revisions, self.forge, self.say)
        promoter = Promoter(self.revisions, self.forge, self.say)
        for name, release in sorted(snap.repo.releases.items()):
            for index, stage in enumerate(release.stages):
                key = f"{name}/{stage.name}"
                deployments = [
                    d
                    for d in snap.desired.deployments
                    if (d.release, d.stage) == (name, stage.name)
                ]
                checked = _parity(parity.get(key))
                facts = self._facts(
                    snap, state, watch, name, release, index, deployments, checked, now
                )
                before = state.stages.get(key)
                record, rollback = step(before, facts)
                if record.phase == Phase.GREEN and (before is None or before.phase != Phase.GREEN):
                    record.evidence = self._bake_evidence(snap, watch, key, stage, record, now)
                if rollback is not None:
                    kept.rejected[rollback.bad] = rollback.reason
                    on = kept.rejected_on.get(rollback.bad, [])
                    kept.rejected_on[rollback.bad] = sorted({*on, stage.name})
                    watch.start_roll(key)
                    runs = stage_runs(self.revisions, snap.head, snap.repo, name, state)
                    record = rollbacks.open(snap, name, stage, runs, rollback, record, now)
                kept.stages[key] = record
            promoter.promotions(snap, name, release, kept, parity, now)
        for key, record in state.stages.items():  # an invalid file holds the release: as it was
            if f"release:{key.split('/')[0]}" in snap.repo.held:
                kept.stages.setdefault(key, record)
        kept.alarms = watch.state()
        kept.checked_at = now
        self._forget_merged(snap, kept)
        return kept.model_dump(mode="json")

    def _sweep(self, snap: Snapshot) -> None:
        """The bot's pull requests, found on the forge by branch (sweep.py): a pass killed
        between two steps of one is completed or closed here, whatever the note kept."""
        if not any(release.stages for release in snap.repo.releases.values()):
            return  # no stage: the bot opens no pull request, and needs no forge
        try:
            forge = self.forge()
        except DenvError as exc:  # said; the rollout's own steps say it again when they need it
            self.say(f"forge: {exc}")
            return
        sweep(forge, self.say)

    @staticmethod
    def _bake_evidence(
        snap: Snapshot, watch: AlarmWatch, key: str, stage: Stage, record: StageRecord, now: float
    ) -> list[AlarmValue]:
        """The stage's alarms over its whole bake, at the pass it turned green: what the
        promotion PR shows (a reading of the last window alone may have seen no request)."""
        watched = stage_alarms(snap.repo.policies, stage.alarms)
        if not watched or record.ready_at is None:
            return []
        found = watch.over_bake(key, record.ready_at, now)
        return [alarm_value(r) for r in found if r.name in watched]

    def _facts(
        self,
        snap: Snapshot,
        state: RolloutState,
        watch: AlarmWatch,
        name: str,
        release: Release,
        index: int,
        deployments: list[DesiredDeployment],
        parity: str | None,
        now: float,
    ) -> StageFacts:
        """What this pass found about one stage. A stage with deploy-time parity is ready
        only once parity has finished: its prompts are denv's own traffic, so the bake and
        the alarms' window start after them (the window's first scrape is their baseline)."""
        stage = release.stages[index]
        key = f"{name}/{stage.name}"
        pins = snap.repo.promotions.get(name)
        pin = pins.promotions.get(stage.name) if pins is not None else None
        revision = self.revisions.of_stage(snap.head, name, index, pin.revision if pin else None)
        rejected = rejected_for(snap.repo, name, stage.name, state)
        record = state.stages.get(key)
        ready = (
            bool(deployments)
            and parity != "waiting"
            and stage_ready(snap, deployments, list(stage.fleets))
        )
        alarms: list[AlarmValue] = []
        watched = stage_alarms(snap.repo.policies, stage.alarms)
        if watched and deployments:
            alarms = self._watched(watch, key, record, revision, ready, rejected, deployments, now)
            alarms = [a for a in alarms if a.name in watched]
        fallback = None
        anywhere = rejected_in(snap.repo, name, state)
        if revision is not None and (revision in rejected or any(a.firing for a in alarms)):
            fallback = self.revisions.fallback(
                snap.head, name, stage.name, index, revision, anywhere
            )
        return StageFacts(
            key=key,
            revision=revision,
            digest=self.revisions.digest(name, revision),
            bake=stage.bake or 0.0,
            rejected=rejected,
            ready=ready,
            running=deployments[0].revision if deployments else None,
            parity=parity,
            alarms=tuple(alarms),
            rollback_after_bake=snap.repo.policies.gates.rollback_on_alarm == "always",
            fallback=fallback,
            elsewhere=anywhere - rejected,
            now=now,
        )

    @staticmethod
    def _watched(
        watch: AlarmWatch,
        key: str,
        record: StageRecord | None,
        revision: str | None,
        ready: bool,
        rejected: frozenset[str],
        deployments: list[DesiredDeployment],
        now: float,
    ) -> list[AlarmValue]:
        """The stage's alarm readings this pass. Its routers are read on every pass, from the
        pass that first saw the revision on: what they refused clients while it rolled out
        (or back) counts, and no request falls between two revisions' windows. Its engines
        are read once every replica is ready (the bake), or once more when a stage that
        baked lost a replica: what its clients were refused while it went down counts. A
        rejected revision's readings are shown, never acted on."""
        kept = record if record is not None and record.revision == revision else None
        if kept is None:
            watch.start_roll(key)
        rolled = now if kept is None else kept.since
        targets = metrics_targets(u.unit for d in deployments for u in d.units)
        baked = kept is not None and kept.ready_at is not None
        if (ready or baked) and revision not in rejected:
            since = kept.ready_at if kept is not None else None
            if since is None:
                watch.start_bake(key)
                since = now
            watch.scrape(key, targets, now, since, rolled)
            return [alarm_value(r) for r in watch.readings(key, now)]
        routers = [(engine, url) for engine, url in targets if engine in ROUTERS]
        watch.scrape(key, routers, now, now, rolled)
        found = watch.readings(key, now)
        return [alarm_value(r) for r in found if routers and at_routers(r.alarm.metric)]

    @staticmethod
    def _forget_merged(snap: Snapshot, kept: RolloutState) -> None:
        """Rejections git records now need no copy in the bot's state (a revision rolled
        back on two stages stays until git records both)."""
        listed = [r for p in snap.repo.promotions.values() for r in p.rejected]
        for revision in list(kept.rejected):
            found = [r for r in listed if r.revision == revision]
            if not found:
                continue
            stages = kept.rejected_on.get(revision) or []
            left = [s for s in stages if not any(r.holds_for(s) for r in found)]
            if left:
                kept.rejected_on[revision] = left
                continue
            kept.rejected.pop(revision)
            kept.rejected_on.pop(revision, None)


def _parity(found: dict[str, Any] | None) -> str | None:
    return None if not found else str(found.get("state"))
