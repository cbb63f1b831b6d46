"""Which revision each stage runs: the first the release's revision at the head (the last
commit that changed what the release uses), later ones their pins."""

from __future__ import annotations

from tests.reconcile.conftest import GitRepo, applied, desired_of, kinds, plan_of

RELEASE = "releases/chat-8b/denv.yaml"


def test_first_stage_follows_head_and_later_stages_wait_for_a_pin(git_repo: GitRepo) -> None:
    first = git_repo.git.head.target
    source = git_repo.source()
    head = source.resolve()
    stages = source.stages(head)
    assert [(s.stage, s.revision, s.pinned) for s in stages.running] == [("canary", head, False)]
    assert [(p.stage, p.reason) for p in stages.pending] == [
        ("prod", "not deployed yet: no pin in releases/chat-8b/promotions.yaml")
    ]

    git_repo.pin("chat-8b", "prod", str(first))
    git_repo.replace(RELEASE, "max_batch: 128", "max_batch: 256")
    head = git_repo.commit("pin prod, change canary")
    stages = source.stages(head)
    assert [(s.stage, s.revision, s.pinned) for s in stages.running] == [
        ("canary", head, False),
        ("prod", str(first), True),
    ]
    assert stages.pending == ()


def test_commits_the_release_does_not_use_leave_its_revision_and_plan(git_repo: GitRepo) -> None:
    """A pin, a traffic file, another model's catalog entry: the canary's revision stays, its
    units keep running as they are (no drift), and prod runs the revision pinned."""
    first = str(git_repo.git.head.target)
    running = applied(desired_of(git_repo))
    git_repo.pin("chat-8b", "prod", first)
    git_repo.commit("promote to prod (promotions.yaml only)")
    git_repo.write(
        "releases/chat-8b/traffic/prod.jsonl",
        '{"timestamp": 0, "input_length": 10, "output_length": 5}\n',
    )
    git_repo.commit("recorded traffic (a traffic file only)")
    git_repo.replace("catalog/models.yaml", "name: Llama-3.1-70B-Instruct", "name: Llama 70B")
    head = git_repo.commit("another model's entry")
    source = git_repo.source()
    assert source.release_revision(head, "chat-8b") == first
    assert [(s.stage, s.revision) for s in source.stages(head).running] == [
        ("canary", first),
        ("prod", first),
    ]
    result = plan_of(git_repo, running)
    canary, prod = result.groups
    assert (canary.revision, canary.running_revisions) == (first, (first,))
    assert [unit for _, unit in kinds(result) if ".canary." in unit] == []
    assert prod.revision == first


def test_the_release_model_entry_is_an_input(git_repo: GitRepo) -> None:
    git_repo.replace("catalog/models.yaml", "name: Llama-3.1-8B-Instruct", "name: Llama 8B")
    head = git_repo.commit("the release's model entry")
    assert git_repo.source().release_revision(head, "chat-8b") == head
