"""Release revisions from git history, the bot's PR edits, and `denv rollback` by hand on the
local forge (real git repositories, the real CLI; no fleet is needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from reconciler.forge.local import LocalForge
from reconciler.reconcile.history import History
from reconciler.rollout.revisions import Revisions, adjust_stages
from reconciler.spec.loader import open_repo
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture

RELEASE = "releases/chat-8b/denv.yaml"


def test_a_revision_moves_only_when_the_release_or_its_recipes_change(git_repo: GitRepo) -> None:
    history = History(git_repo.source().git_dir)
    first = str(git_repo.git.head.target)
    [initial] = history.revisions(first, "chat-8b")
    git_repo.write("docs-note.txt", "unrelated\n")
    unrelated = git_repo.commit("an unrelated file")
    git_repo.pin("chat-8b", "prod", initial.revision)
    pinned = git_repo.commit("a pin")
    assert history.revisions(unrelated, "chat-8b")[0] == initial
    assert history.revisions(pinned, "chat-8b")[0] == initial
    git_repo.replace("recipes/llama-3.1-8b/vllm@1.yaml", "recipe:", "# edited\nrecipe:")
    recipe = git_repo.commit("the recipe changed")
    git_repo.replace(RELEASE, "max_batch: 128", "max_batch: 64")
    batch = git_repo.commit("max_batch 64")
    found = history.revisions(batch, "chat-8b", count=3)
    assert [r.revision for r in found] == [batch, recipe, initial.revision]
    assert len({r.digest for r in found}) == 3
    assert history.digest_at(pinned, "chat-8b") == initial.digest


def denv(repo: GitRepo, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DENV_CACHE": str(repo.cache), "DENV_FORGE": "local", "DENV_USER": "ada"}
    env.pop("DENV_REPO", None)
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args, "--repo", str(repo.path)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


@pytest.fixture
def pinned(git_repo: GitRepo) -> tuple[GitRepo, str, str]:
    """prod pinned to the first revision, then to the second (max_batch 64)."""
    first = str(git_repo.git.head.target)
    git_repo.pin("chat-8b", "prod", first)
    git_repo.commit("promote the first revision to prod")
    git_repo.replace(RELEASE, "max_batch: 128", "max_batch: 64")
    second = git_repo.commit("max_batch 64")
    git_repo.pin("chat-8b", "prod", second)
    git_repo.commit("promote the second revision to prod")
    return git_repo, first, second


def test_rollback_by_hand_moves_the_pin_back_and_rejects(pinned: tuple[GitRepo, str, str]) -> None:
    repo, first, second = pinned
    done = denv(repo, "rollback", "chat-8b/prod", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert (answer["bad"], answer["target"], answer["merged"]) == (second, first, True)
    promotions = open_repo(repo.path, "main").promotions["chat-8b"]
    assert promotions.promotions["prod"].revision == first
    assert [r.revision for r in promotions.rejected] == [second]
    assert "by hand by ada" in promotions.rejected[0].reason
    pr = LocalForge(repo.path).pull_request(answer["pr"])
    assert pr.head_branch == "denv/rollback/chat-8b/prod" and "<!-- denv:rollback -->" in pr.body
    again = denv(repo, "rollback", "chat-8b/prod", "--to", second[:12])
    assert again.returncode == 1 and "is rejected" in again.stderr  # never back to it


def test_rollback_of_the_first_stage_restores_the_release_block(
    pinned: tuple[GitRepo, str, str],
) -> None:
    repo, first, second = pinned
    before = (repo.path / RELEASE).read_text()
    done = denv(repo, "rollback", "chat-8b/canary", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["target"] == first
    main = open_repo(repo.path, "main")
    assert main.releases["chat-8b"].release.overrides["settings"]["max_batch"] == 128
    assert [r.revision for r in main.promotions["chat-8b"].rejected] == [second]
    after = (repo.path / RELEASE).read_text()
    assert after.count("\n") == before.count("\n") and "# An example release" in after


def test_rolling_back_the_canary_by_hand_leaves_prod_on_the_revision(
    pinned: tuple[GitRepo, str, str],
) -> None:
    repo, first, second = pinned  # the canary (the head) and prod both at `second`
    done = denv(repo, "rollback", "chat-8b/canary")
    assert done.returncode == 0, done.stderr
    assert f"  canary: rolled back from {second[:12]} to {first[:12]}" in done.stdout
    assert f"  prod: keeps running {second[:12]}: rolled back only if its own" in done.stdout
    main = open_repo(repo.path, "main")
    [rejection] = main.promotions["chat-8b"].rejected
    assert (rejection.revision, rejection.stage) == (second, "canary")
    source = repo.source()
    source.sync()
    head = source.resolve()
    runs = adjust_stages(Revisions(source), source.stages(head), {})
    assert {(s.stage, s.revision) for s in runs.running if s.stage == "prod"} == {("prod", second)}
