"""Which revision each stage runs: the first follows the head, later ones their pins."""

from __future__ import annotations

from reconciler.reconcile.revisions import stage_revisions
from tests.reconcile.conftest import GitRepo


def test_first_stage_follows_head_and_later_stages_wait_for_a_pin(git_repo: GitRepo) -> None:
    first = git_repo.git.head.target
    source = git_repo.source()
    head = source.resolve()
    stages = stage_revisions(source.repo_at(head), head)
    assert [(s.stage, s.revision, s.pinned) for s in stages.running] == [("canary", head, False)]
    assert [(p.stage, p.reason) for p in stages.pending] == [
        ("prod", "not deployed yet: no pin in releases/chat-8b/promotions.yaml")
    ]

    git_repo.pin("chat-8b", "prod", str(first))
    git_repo.replace("releases/chat-8b/denv.yaml", "max_batch: 128", "max_batch: 256")
    head = git_repo.commit("pin prod, change canary")
    stages = stage_revisions(source.repo_at(head), head)
    assert [(s.stage, s.revision, s.pinned) for s in stages.running] == [
        ("canary", head, False),
        ("prod", str(first), True),
    ]
    assert stages.pending == ()
