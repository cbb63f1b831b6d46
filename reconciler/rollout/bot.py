"""Adapter: the rollout bot, run by the reconciler after each pass — readiness and alarms of
every stage, one step of each stage's state machine (stages.py), then the pull requests it
calls for: a promotion PR for the next stage, merged once its gate is met; a rollback PR.

Its state is kept with the reconciler's lease note (the `checks` hook), so it survives
`--once` runs and a restarted bot; git stays the record of what runs where.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from reconciler.errors import DenvError
from reconciler.forge.commands import merge_blockers
from reconciler.forge.models import CheckRun, Conclusion, MergeStatus, PrState
from reconciler.forge.protocol import Forge
from reconciler.forge.render import render_promotion
from reconciler.reconcile import probes
from reconciler.reconcile.desired import DesiredDeployment
from reconciler.reconcile.plan import ActionKind
from reconciler.reconcile.snapshot import Snapshot
from reconciler.rollout.evidence import alarm_value, approvals_needed, promotion_view
from reconciler.rollout.prs import promotion_change
from reconciler.rollout.revisions import Revisions, rejected_in
from reconciler.rollout.rollback import Rollbacks
from reconciler.rollout.stages import step, wants_promotion
from reconciler.rollout.state import AlarmValue, PromotionPr, RolloutState, StageFacts, StageRecord
from reconciler.rollout.watch import AlarmWatch, metrics_targets
from reconciler.spec.release import Release

PROMOTION_CHECK = "denv promotion"


def stage_ready(snap: Snapshot, deployments: list[DesiredDeployment], fleets: list[str]) -> bool:
    """Every fleet of the stage has its deployment, the plan left it as it is, and every
    replica answers its readiness probe: warm, not merely launched."""
    if sorted(d.fleet for d in deployments) != sorted(fleets):
        return False
    keys = {d.key for d in deployments}
    if any(
        (a.release, a.stage, a.fleet) in keys and a.kind != ActionKind.KEEP
        for a in snap.plan.actions
    ):
        return False
    return all(probes.is_ready(u.unit) for d in deployments for u in d.units)


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
        state = RolloutState.model_validate(previous or {})
        policies = snap.repo.policies
        prometheus = policies.prometheus.url if policies.prometheus is not None else None
        watch = AlarmWatch(policies.alarms, state=state.alarms or None, prometheus=prometheus)
        kept = RolloutState(rejected=dict(state.rejected))
        rollbacks = Rollbacks(self.revisions, self.forge, self.say)
        for name, release in sorted(snap.repo.releases.items()):
            for index, stage in enumerate(release.stages):
                key = f"{name}/{stage.name}"
                deployments = [
                    d
                    for d in snap.desired.deployments
                    if (d.release, d.stage) == (name, stage.name)
                ]
                facts = self._facts(snap, state, watch, name, release, index, deployments, now)
                facts = facts.model_copy(update={"parity": _parity(parity.get(key))})
                record, rollback = step(state.stages.get(key), facts)
                if rollback is not None:
                    kept.rejected[rollback.bad] = rollback.reason
                    watch.forget(key)
                    record = rollbacks.open(snap, name, stage, index, rollback, record, now)
                kept.stages[key] = record
            self._promotions(snap, name, release, kept, parity, now)
        kept.alarms = watch.state()
        self._forget_merged(snap, kept)
        return kept.model_dump(mode="json")

    def _facts(
        self,
        snap: Snapshot,
        state: RolloutState,
        watch: AlarmWatch,
        name: str,
        release: Release,
        index: int,
        deployments: list[DesiredDeployment],
        now: float,
    ) -> StageFacts:
        stage = release.stages[index]
        key = f"{name}/{stage.name}"
        pins = snap.repo.promotions.get(name)
        pin = pins.promotions.get(stage.name) if pins is not None else None
        revision = self.revisions.of_stage(snap.head, name, index, pin.revision if pin else None)
        rejected = rejected_in(snap.repo, name, state)
        record = state.stages.get(key)
        ready = bool(deployments) and stage_ready(snap, deployments, list(stage.fleets))
        alarms: list[AlarmValue] = []
        watched = [a for a in stage.alarms if a in snap.repo.policies.alarms]
        if ready and watched and revision not in rejected:
            fresh = record is None or record.revision != revision or record.ready_at is None
            if fresh:
                watch.forget(key)  # the window starts with this revision, ready
            watch.scrape(key, metrics_targets(u.unit for d in deployments for u in d.units), now)
            alarms = [alarm_value(r) for r in watch.readings(key, now) if r.name in watched]
        fallback = None
        if revision is not None and revision in rejected:
            fallback = self.revisions.fallback(
                snap.head, name, stage.name, index, revision, rejected
            )
        return StageFacts(
            key=key,
            revision=revision,
            digest=self.revisions.digest(name, revision),
            bake=stage.bake or 0.0,
            rejected=rejected,
            ready=ready,
            running=deployments[0].revision if deployments else None,
            parity=None,
            alarms=tuple(alarms),
            rollback_after_bake=snap.repo.policies.gates.rollback_on_alarm == "always",
            fallback=fallback,
            now=now,
        )

    def _promotions(
        self,
        snap: Snapshot,
        name: str,
        release: Release,
        kept: RolloutState,
        parity: dict[str, Any],
        now: float,
    ) -> None:
        """Stage k green at a revision stage k+1 does not run: its PR, and its gate."""
        pins = snap.repo.promotions.get(name)
        rejected = rejected_in(snap.repo, name, kept)
        for index, stage in enumerate(release.stages[:-1]):
            after = release.stages[index + 1]
            record = kept.stages[f"{name}/{stage.name}"]
            pin = pins.promotions.get(after.name) if pins is not None else None
            next_pin = pin.revision if pin is not None else None
            pr = record.promotion
            if pr is not None and pr.state == "open" and pr.revision in rejected:
                self._mark_stale(pr, record)
            if not wants_promotion(
                record, next_pin, self.revisions.digest(name, next_pin), rejected
            ):
                continue
            if pr is not None and pr.revision == record.revision and pr.state == "closed":
                continue  # a person closed it: not reopened until a new revision
            try:
                record.promotion = self._promote(snap, name, release, index, record, parity, now)
                record.errors = []
            except DenvError as exc:
                record.errors = [f"promotion to {after.name}: {exc}"]
                self.say(f"rollout {name}/{stage.name}: {record.errors[0]}")

    def _promote(
        self,
        snap: Snapshot,
        name: str,
        release: Release,
        index: int,
        record: StageRecord,
        parity: dict[str, Any],
        now: float,
    ) -> PromotionPr:
        stage, after = release.stages[index], release.stages[index + 1]
        assert record.revision is not None
        gates = snap.repo.policies.gates
        required, needed = approvals_needed(after, gates.default_approvals, gates.approvers)
        forge = self.forge()
        pr = record.promotion
        if pr is None or pr.revision != record.revision or pr.state != "open":
            found = parity.get(f"{name}/{stage.name}")
            verdict = _parity_text(found)
            view = promotion_view(
                name, stage, after, record, snap.repo.policies.alarms, verdict, needed
            )
            title = f"Promote {name} {record.revision[:12]} to {after.name}"
            at = datetime.fromtimestamp(now, UTC)
            change = promotion_change(
                name, after.name, record.revision, title, render_promotion(view), at
            )
            opened = forge.open_or_update_bot_pr(change)
            summary = f"{stage.name} baked {record.revision[:12]} green; {verdict}"
            forge.set_check(
                opened.head_sha,
                CheckRun(
                    name=PROMOTION_CHECK,
                    title=f"{stage.name} green",
                    summary=summary,
                    conclusion=Conclusion.SUCCESS,
                ),
            )
            self.say(f"rollout {name}: promotion PR #{opened.number} for {after.name}")
            pr = PromotionPr(
                number=opened.number, url=opened.url, revision=record.revision, stage=after.name
            )
        return self._gate(pr, required, gates.approvers)

    def _gate(self, pr: PromotionPr, required: int, approvers: list[str]) -> PromotionPr:
        """Merge the promotion PR once its approvals and checks allow it."""
        forge = self.forge()
        current = forge.pull_request(pr.number)
        if current.state != PrState.OPEN:
            return pr.model_copy(update={"state": current.state.value, "blockers": []})
        approvals = forge.approvals(pr.number, approvers)
        blockers = merge_blockers(approvals, required, forge.checks(current.head_sha))
        ignored = [f"{i.user}'s approval does not count: {i.reason}" for i in approvals.ignored]
        if blockers:
            return pr.model_copy(update={"blockers": blockers + ignored})
        outcome = forge.merge(pr.number, current.head_sha)
        if outcome.status == MergeStatus.MERGED:
            self.say(f"rollout: merged promotion PR #{pr.number}")
            return pr.model_copy(update={"state": "merged", "blockers": []})
        return pr.model_copy(update={"blockers": [outcome.reason or outcome.status.value]})

    def _mark_stale(self, pr: PromotionPr, record: StageRecord) -> None:
        """A PR that pins a rejected revision is never merged by the bot; say so on it."""
        note = (
            f"denv will not merge this: `{pr.revision[:12]}` was rejected "
            f"({record.reason or 'rolled back'}). A new commit to the release opens a new one."
        )
        try:
            self.forge().upsert_comment(pr.number, "promotion-stale", note)
            pr.state = "stale"
        except DenvError as exc:
            record.errors = [f"stale promotion PR #{pr.number}: {exc}"]

    @staticmethod
    def _forget_merged(snap: Snapshot, kept: RolloutState) -> None:
        """Rejections git records now need no copy in the bot's state."""
        listed = {r.revision for p in snap.repo.promotions.values() for r in p.rejected}
        kept.rejected = {k: v for k, v in kept.rejected.items() if k not in listed}


def _parity(found: dict[str, Any] | None) -> str | None:
    return None if not found else str(found.get("state"))


def _parity_text(found: dict[str, Any] | None) -> str:
    if not found:
        return "one recipe on every fleet: no deploy-time parity check needed"
    return f"{found.get('verdict', found.get('state'))} against {found.get('reference', '?')}"
