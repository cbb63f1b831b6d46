"""Adapter: which release revision a stage is at, as git says, and what it falls back to; and
the reconciler's `adjust` hook, which keeps a rejected revision from running."""

from __future__ import annotations

from typing import Any

from reconciler.reconcile.revisions import StageRevision, Stages
from reconciler.reconcile.source import GitSource
from reconciler.rollout.stages import last_good
from reconciler.rollout.state import RolloutState
from reconciler.spec.repo import Repo

NEWER_WALK = 32  # release revisions looked back to order two of them


class Revisions:
    """Release revisions of one source's releases, per head (history is cached)."""

    def __init__(self, source: GitSource) -> None:
        self.source = source
        self.history = source.history

    def of_stage(self, head: str, release: str, index: int, pin: str | None) -> str | None:
        """The release revision git names for a stage: the head's, or the pin."""
        return pin if index > 0 else self.source.release_revision(head, release)

    def digest(self, release: str, revision: str | None) -> str | None:
        return self.history.digest_at(revision, release) if revision else None

    def newer(self, head: str, release: str, a: str, b: str) -> bool:
        """Whether revision `a` came after `b` in the release's history up to `head`."""
        found = [r.revision for r in self.history.revisions(head, release, count=NEWER_WALK)]
        return a in found and b in found and found.index(a) < found.index(b)

    def fallback(
        self, head: str, release: str, stage: str, index: int, bad: str, rejected: frozenset[str]
    ) -> str | None:
        """The newest revision before `bad` that git shows for the stage, not rejected."""
        if index == 0:
            earlier = [r.revision for r in self.history.revisions(head, release, count=16)]
        else:
            earlier = self.history.pins(head, release, stage)
        after = earlier[earlier.index(bad) + 1 :] if bad in earlier else earlier
        return next((r for r in after if r != bad and r not in rejected), None)


def rejected_in(repo: Repo, release: str, state: RolloutState) -> frozenset[str]:
    """Rejected revisions of a release, on any stage: git's and the bot's own (not yet
    merged). None is ever promoted, nor returned to by a rollback."""
    pins = repo.promotions.get(release)
    listed = {r.revision for r in pins.rejected} if pins is not None else set()
    return frozenset(listed | set(state.rejected))


def rejected_for(repo: Repo, release: str, stage: str, state: RolloutState) -> frozenset[str]:
    """The revisions `stage` must not run: those rolled back on it, and those rejected without
    a stage (every stage). Another stage's rejection leaves what this stage runs alone."""
    pins = repo.promotions.get(release)
    listed = {r.revision for r in pins.rejected if r.holds_for(stage)} if pins else set()
    own = {r for r in state.rejected if stage in state.rejected_on.get(r, [stage])}
    return frozenset(listed | own)


def stage_runs(
    revisions: Revisions, head: str, repo: Repo, release: str, state: RolloutState
) -> list[tuple[str, str | None]]:
    """Each stage of the release, in order, with the revision it runs: git's (the head's or
    the pin), or the bot's override while a rollback is in force."""
    spec = repo.releases.get(release)
    pins = repo.promotions.get(release)
    found: list[tuple[str, str | None]] = []
    for index, stage in enumerate(spec.stages if spec is not None else []):
        pin = pins.promotions.get(stage.name) if pins is not None else None
        named = revisions.of_stage(head, release, index, pin.revision if pin else None)
        record = state.stages.get(f"{release}/{stage.name}")
        override = record.override if record and record.rolled_back == named else None
        found.append((stage.name, override or named))
    return found


def adjust_stages(revisions: Revisions, stages: Stages, kept: dict[str, Any]) -> Stages:
    """The reconciler's hook: a stage at a revision rejected for it runs its last good one
    instead."""
    state = RolloutState.model_validate(kept.get("rollout") or {})
    head = revisions.source.repo_at(stages.head)
    running: list[StageRevision] = []
    for stage in stages.running:
        release = head.releases.get(stage.release)
        names = [s.name for s in release.stages] if release is not None else []
        index = names.index(stage.stage) if stage.stage in names else 0
        bad = stage.revision  # the pin, or the release revision at the head
        if bad not in rejected_for(head, stage.release, stage.stage, state):
            running.append(stage)
            continue
        rejected = rejected_in(head, stage.release, state)
        record = state.stages.get(f"{stage.release}/{stage.stage}")
        target = record.override if record and record.rolled_back == bad else None
        if not target:
            fallback = revisions.fallback(
                stages.head, stage.release, stage.stage, index, bad, rejected
            )
            target = last_good(record, bad, rejected, fallback)
        moved = {"revision": target, "files_at": None}
        running.append(stage.model_copy(update=moved) if target else stage)
    return stages.model_copy(update={"running": tuple(running)})
