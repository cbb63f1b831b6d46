"""`close_pr` on both forges: closed without a merge, with one marked comment saying why;
a repeat, or a pull request closed or merged already, changes nothing."""

from __future__ import annotations

from pathlib import Path

from reconciler.forge.local import LocalForge
from reconciler.forge.markers import read_marker
from reconciler.forge.models import PrState
from tests.forge.conftest import GitHubSetup
from tests.forge.gitrepo import commit_file, git
from tests.forge.test_github import open_pr

RELEASE = "releases/chat-8b/denv.yaml"
WHY = "denv will not merge this: `3f2a1b0c9d1e` was rejected."


def test_local_forge_closes_with_a_comment(git_repo: Path) -> None:
    git(git_repo, "checkout", "-q", "-b", "stale")
    text = (git_repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    head = commit_file(git_repo, RELEASE, text, "chat-8b: max_batch 192")
    git(git_repo, "checkout", "-q", "main")
    forge = LocalForge(git_repo, user="ada")
    forge.open_pr("stale", "chat-8b: bigger batches")
    closed = forge.close_pr(1, WHY)
    assert (closed.state, closed.head_sha) == (PrState.CLOSED, head)
    assert forge.pull_requests() == []
    again = forge.close_pr(1, WHY + " (again)")
    assert again.state == PrState.CLOSED
    [comment] = forge.comments(1)
    assert comment.author == "denv-bot" and read_marker(comment.body) == ("closed", 1)
    assert comment.body.endswith(WHY + "\n")


def test_github_closes_with_a_comment(github: GitHubSetup) -> None:
    number, _ = open_pr(github)
    closed = github.forge.close_pr(number, WHY)
    assert closed.state == PrState.CLOSED
    assert (
        github.fake.pulls[number]["state"] == "closed" and not github.fake.pulls[number]["merged"]
    )
    assert github.forge.pull_requests() == []
    writes = [r for r in github.fake.requests if r.startswith(("PATCH", "POST"))]
    github.forge.close_pr(number, WHY)  # closed already: nothing written
    assert [r for r in github.fake.requests if r.startswith(("PATCH", "POST"))] == writes
    [body] = github.fake.comment_bodies(number)
    assert read_marker(body) == ("closed", 1) and body.endswith(WHY + "\n")
