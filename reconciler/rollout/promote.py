"""Adapter: promotion pull requests — for each stage green at a revision the next stage does
not run, one PR that moves the next stage's pin (its body the evidence: the bake's alarm
readings, deploy-time parity, bench results), merged once its gate is met; and a promotion
PR gone stale (its revision rejected, or the next stage already at it or at a newer one)
closed with a comment saying why."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.catalog.deployments import deployments
from reconciler.catalog.roofline import result_roofline
from reconciler.errors import DenvError
from reconciler.forge.commands import merge_blockers
from reconciler.forge.comments import render
from reconciler.forge.models import CheckRun, Conclusion, MergeStatus, PrState
from reconciler.forge.protocol import Forge
from reconciler.reconcile.snapshot import Snapshot
from reconciler.rollout.benchfigures import Wanted, bench_figures, none_yet
from reconciler.rollout.evidence import approvals_needed, promotion_view
from reconciler.rollout.prs import promotion_change
from reconciler.rollout.revisions import Revisions, rejected_in
from reconciler.rollout.stages import unhealthy, wants_promotion
from reconciler.rollout.state import PromotionPr, RolloutState, StageRecord
from reconciler.spec.policy import watched_alarms
from reconciler.spec.release import Release, Stage
from reconciler.trials.plan import recipe_digest

PROMOTION_CHECK = "denv promotion"


@dataclass
class Promoter:
    revisions: Revisions
    forge: Callable[[], Forge]
    say: Callable[[str], None]

    def promotions(
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
            if pr is not None and pr.state == "open":
                why = self._stale(snap.head, name, after.name, pr, next_pin, rejected, kept)
                if why:
                    self._close(pr, record, why)
            if not wants_promotion(
                record, next_pin, self.revisions.digest(name, next_pin), rejected
            ):
                continue
            if next_pin and self.revisions.newer(snap.head, name, next_pin, record.revision or ""):
                continue  # the next stage runs a newer revision already: never back
            if pr is not None and pr.revision == record.revision and pr.state == "closed":
                continue  # closed (by a person, or as stale): not reopened for this revision
            try:
                record.promotion = self._promote(snap, name, release, index, record, parity, now)
                record.errors = []
            except DenvError as exc:
                record.errors = [f"promotion to {after.name}: {exc}"]
                self.say(f"rollout {name}/{stage.name}: {record.errors[0]}")

    def _stale(
        self,
        head: str,
        name: str,
        stage: str,
        pr: PromotionPr,
        pin: str | None,
        rejected: frozenset[str],
        kept: RolloutState,
    ) -> str:
        """Why an open promotion PR should never merge ('' when it may)."""
        short = pr.revision[:12]
        if pr.revision in rejected:
            why = kept.rejected.get(pr.revision) or "rolled back"
            return (
                f"denv will not merge this: `{short}` was rejected ({why}). "
                "A new commit to the release opens a new promotion."
            )
        if pin is None:
            return ""
        if pin == pr.revision or self.revisions.digest(name, pin) == self.revisions.digest(
            name, pr.revision
        ):
            return f"Closed by denv: `{stage}` runs `{short}` (or the same content) already."
        if self.revisions.newer(head, name, pin, pr.revision):
            return (
                f"Closed by denv: superseded, `{stage}` runs the newer `{pin[:12]}` already; "
                f"promoting `{short}` would take it back."
            )
        return ""

    def _close(self, pr: PromotionPr, record: StageRecord, why: str) -> None:
        try:
            closed = self.forge().close_pr(pr.number, why)
        except DenvError as exc:
            record.errors = [f"stale promotion PR #{pr.number}: {exc}"]
            return
        pr.state = closed.state.value  # merged already, by a person: kept as merged
        pr.blockers = [why] if closed.state == PrState.CLOSED else []
        if closed.state == PrState.CLOSED:
            self.say(f"rollout: closed stale promotion PR #{pr.number}: {why}")

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
            wanted = self._bench_wanted(snap, name, after, record.revision)
            view = promotion_view(
                name, stage, after, record, watched_alarms(snap.repo.policies), verdict, needed
            )
            view = view.model_copy(
                update={
                    "bench": bench_figures(
                        snap.repo.results,
                        wanted,
                        _hardware_id(snap),
                        lambda result: result_roofline(snap.repo, result),
                    ),
                    "bench_none": none_yet(wanted),
                }
            )
            title = f"Promote {name} {record.revision[:12]} to {after.name}"
            # when the stage baked green, the same on every pass: a pass cut short after the
            # branch moved and run again proposes the same tree, never a second commit
            baked = record.ready_at + (stage.bake or 0.0) if record.ready_at is not None else now
            at = datetime.fromtimestamp(baked, UTC)
            change = promotion_change(name, after.name, record.revision, title, render(view), at)
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
        return self._gate(pr, required, gates.approvers, unhealthy(stage.name, record))

    def _bench_wanted(self, snap: Snapshot, name: str, after: Stage, revision: str) -> list[Wanted]:
        """Each fleet of the next stage: the recipe it runs at `revision`, by digest."""
        try:
            at = self.revisions.source.repo_at(revision)
        except DenvError:
            return []
        hardware = _hardware_id(snap)
        return [
            Wanted(d.fleet, hardware(snap.repo.fleets[d.fleet].hardware), recipe_digest(d.recipe))
            for d in deployments(at)
            if (d.release, d.stage) == (name, after.name) and d.fleet in snap.repo.fleets
        ]

    def _gate(self, pr: PromotionPr, required: int, approvers: list[str], hold: str) -> PromotionPr:
        """Merge the promotion PR once its approvals and checks allow it, and the stage it
        promotes from is healthy now (`hold` says why not): its check says so meanwhile."""
        forge = self.forge()
        current = forge.pull_request(pr.number)
        if current.state != PrState.OPEN:
            return pr.model_copy(update={"state": current.state.value, "blockers": []})
        if hold != pr.held:
            title = f"waiting: {hold}" if hold else "healthy again"
            conclusion = Conclusion.FAILURE if hold else Conclusion.SUCCESS
            check = CheckRun(
                name=PROMOTION_CHECK, title=title, summary=hold or title, conclusion=conclusion
            )
            forge.set_check(current.head_sha, check)
            self.say(f"rollout: promotion PR #{pr.number} {title}")
            pr = pr.model_copy(update={"held": hold})
        if hold:
            return pr.model_copy(update={"blockers": [f"waiting: {hold}"]})
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


def _hardware_id(snap: Snapshot) -> Callable[[str], str]:
    def resolve(key: str) -> str:
        found = snap.repo.resolve_hardware(key)
        return found.id if found is not None else key

    return resolve


def _parity_text(found: dict[str, Any] | None) -> str:
    if not found:
        return "one recipe on every fleet: no deploy-time parity check needed"
    return f"{found.get('verdict', found.get('state'))} against {found.get('reference', '?')}"
