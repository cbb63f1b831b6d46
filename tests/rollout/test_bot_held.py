"""The rollout state of a release an invalid file holds on the default branch (its phases,
its bake's start, its promotion PR) is kept as it was, not dropped as a removed release's."""

from __future__ import annotations

from reconciler.errors import ForgeError
from reconciler.forge.protocol import Forge
from reconciler.reconcile.desired import Desired
from reconciler.reconcile.plan import Plan
from reconciler.reconcile.snapshot import Snapshot
from reconciler.rollout.bot import RolloutBot
from reconciler.rollout.revisions import Revisions
from reconciler.rollout.state import RolloutState, StageRecord
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture


def no_forge() -> Forge:
    raise ForgeError("no forge in this test: nothing is promoted")


def test_a_held_release_keeps_its_rollout_state(git_repo: GitRepo) -> None:
    git_repo.replace("releases/chat-8b/denv.yaml", "stages:", "stagez:")
    git_repo.commit("chat-8b broken")
    source = git_repo.source()
    head = source.resolve()
    repo = source.repo_at(head)
    assert "release:chat-8b" in repo.held
    snap = Snapshot(head, repo, Desired(head=head), {}, Plan(head=head))
    baking = StageRecord(revision="a" * 40, since=10.0, ready_at=20.0)
    previous = RolloutState(stages={"chat-8b/canary": baking}).model_dump(mode="json")
    bot = RolloutBot(Revisions(source), no_forge, clock=lambda: 100.0)
    kept = RolloutState.model_validate(bot.check(snap, previous, {}))
    assert kept.stages == {"chat-8b/canary": baking}
