"""Adapter: `denv rollback RELEASE/STAGE [--to REV]` — the bot's rollback path by hand: a
rollback PR that restores the last good revision (or `--to`) and rejects the current one,
merged at once unless told not to (then the bot keeps running the current one until it is)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from reconciler.errors import UsageError
from reconciler.forge.comments import render
from reconciler.forge.models import MergeStatus
from reconciler.forge.protocol import Forge
from reconciler.rollout.evidence import rollback_view
from reconciler.rollout.revisions import Revisions, rejected_in, stage_runs
from reconciler.rollout.rollback import rollback_pr
from reconciler.rollout.stages import rollback_effects
from reconciler.rollout.state import RollBack, RolloutState, StageEffect
from reconciler.spec.policy import watched_alarms


@dataclass(frozen=True)
class ManualRollback:
    release: str
    stage: str
    bad: str
    target: str
    pr: int
    url: str
    merged: bool
    refused: str = ""  # why the forge did not merge it
    stages: tuple[StageEffect, ...] = ()  # what the rollback does to each stage

    def as_dict(self) -> dict[str, object]:
        return self.__dict__ | {"stages": [e.model_dump() for e in self.stages]}


def manual_rollback(
    revisions: Revisions, forge: Forge, where: str, to: str | None, by: str, merge: bool = True
) -> ManualRollback:
    release_name, _, stage_name = where.partition("/")
    source = revisions.source
    source.sync()
    head = source.resolve()
    repo = source.repo_at(head)
    release = repo.releases.get(release_name)
    if release is None:
        raise UsageError(f"no release '{release_name}' (known: {', '.join(sorted(repo.releases))})")
    names = [s.name for s in release.stages]
    if stage_name not in names:
        raise UsageError(f"release {release_name} has no stage '{stage_name}' ({', '.join(names)})")
    index, stage = names.index(stage_name), release.stages[names.index(stage_name)]
    pins = repo.promotions.get(release_name)
    pin = pins.promotions.get(stage_name) if pins is not None else None
    bad = revisions.of_stage(head, release_name, index, pin.revision if pin else None)
    if bad is None:
        raise UsageError(f"{where} runs nothing yet: nothing to roll back")
    rejected = rejected_in(repo, release_name, RolloutState())
    target = source.resolve(to) if to else None
    target = target or revisions.fallback(head, release_name, stage_name, index, bad, rejected)
    if target is None:
        raise UsageError(f"{where}: no earlier revision to return to; name one with --to")
    if target == bad or target in rejected:
        why = "is what runs" if target == bad else "is rejected"
        raise UsageError(f"{where}: {target[:12]} {why}; name another with --to")
    reason = f"rolled back by hand by {by}"
    now = time.time()
    rollback = RollBack(key=f"{release_name}/{stage_name}", bad=bad, target=target, reason=reason)
    runs = stage_runs(revisions, head, repo, release_name, RolloutState())
    effects = rollback_effects(runs, stage_name, bad, target)
    body = render(
        rollback_view(
            release_name,
            stage,
            bad,
            target,
            [],
            watched_alarms(repo.policies),
            reason,
            now,
            effects,
        )
    )
    pr = rollback_pr(forge, revisions, head, release_name, stage, index == 0, rollback, body, now)
    merged, refused = False, ""
    if merge:
        outcome = forge.merge(pr.number, pr.head_sha)
        merged = outcome.status == MergeStatus.MERGED
        refused = "" if merged else outcome.reason or outcome.status.value
    return ManualRollback(
        release_name, stage_name, bad, target, pr.number, pr.url, merged, refused, tuple(effects)
    )
