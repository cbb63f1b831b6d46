"""Adapter: rollback pull requests — the bot's, after an alarm, and `denv rollback`'s.

The PR records what already happened (the bot runs the last good revision from its next
pass on): for the first stage it restores the release block and the recipe files of the last
good revision; for a later stage it moves the pin back. Either way the bad revision is listed
under `rejected` in promotions.yaml with the stage it was rolled back on, so nothing promotes
it again; the body says what the rollback did to each stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from reconciler.errors import DenvError
from reconciler.forge.comments import render
from reconciler.forge.models import PullRequest
from reconciler.forge.protocol import BotChange, BotFiles, Forge
from reconciler.reconcile.snapshot import Snapshot
from reconciler.rollout.evidence import rollback_view
from reconciler.rollout.prs import add_rejection, rollback_branch, rollback_change
from reconciler.rollout.revisions import Revisions
from reconciler.rollout.stages import rollback_effects
from reconciler.rollout.state import RollBack, StageRecord
from reconciler.spec.policy import watched_alarms
from reconciler.spec.release import Stage


def rollback_pr(
    forge: Forge,
    revisions: Revisions,
    head: str,
    release: str,
    stage: Stage,
    first: bool,
    rollback: RollBack,
    body: str,
    at: float,
) -> PullRequest:
    when = datetime.fromtimestamp(at, UTC)
    target = rollback.target
    title = f"Roll back {release} {stage.name} to {target[:12] if target else 'nothing'}"
    if target is None:  # nothing earlier: the PR only records the rejection
        bad, reason = rollback.bad, rollback.reason

        def reject(files: BotFiles) -> None:
            add_rejection(files, release, bad, reason, when, stage.name)

        change = BotChange(
            branch=rollback_branch(release, stage.name),
            title=f"Reject {release} {bad[:12]}",
            body=body,
            message=f"{release}: reject {bad[:12]}",
            edit=reject,
        )
        return forge.open_or_update_bot_pr(change)
    restore = revisions.history.restore(release, head, target) if first else {}
    change = rollback_change(
        release,
        stage.name,
        first,
        rollback.bad,
        target,
        rollback.reason,
        restore,
        title,
        body,
        when,
    )
    return forge.open_or_update_bot_pr(change)


@dataclass
class Rollbacks:
    revisions: Revisions
    forge: Callable[[], Forge]
    say: Callable[[str], None]

    def open(
        self,
        snap: Snapshot,
        release: str,
        stage: Stage,
        runs: list[tuple[str, str | None]],
        rollback: RollBack,
        record: StageRecord,
        at: float,
    ) -> StageRecord:
        """Record a rollback the bot made in a PR; a forge error is kept and said (the
        rollback itself does not wait for it). `runs`: each stage of the release and the
        revision it runs, first stage first."""
        where = f"rollout {release}/{stage.name}"
        self.say(
            f"{where}: ROLLBACK {rollback.bad[:12]} -> "
            f"{rollback.target[:12] if rollback.target else 'nothing earlier'}: {rollback.reason}"
        )
        firing = [a for a in record.alarms if a.firing]
        effects = rollback_effects(runs, stage.name, rollback.bad, rollback.target)
        for effect in effects:
            if effect.stage != stage.name:
                self.say(f"rollout {release}/{effect.stage}: {effect.text}")
        body = render(
            rollback_view(
                release,
                stage,
                rollback.bad,
                rollback.target or rollback.bad,
                firing,
                watched_alarms(snap.repo.policies),
                rollback.reason,
                at,
                effects,
            )
        )
        try:
            pr = rollback_pr(
                self.forge(),
                self.revisions,
                snap.head,
                release,
                stage,
                bool(runs) and runs[0][0] == stage.name,
                rollback,
                body,
                at,
            )
        except DenvError as exc:
            self.say(f"{where}: rollback PR not opened: {exc}")
            return record.model_copy(update={"errors": [f"rollback PR: {exc}"]})
        self.say(f"{where}: rollback PR #{pr.number}")
        return record.model_copy(update={"rollback_pr": pr.number, "rollback_url": pr.url})
