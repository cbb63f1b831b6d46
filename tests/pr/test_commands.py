"""`/denv` commands run on the commit they were given on: a push after the comment refuses the
command, naming both commits (on the local forge, which records the head a comment was made
on, and on GitHub, where a command names its commit); pure rules first."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.forge.commands import comment_commands, head_moved
from reconciler.forge.local import LocalForge
from reconciler.forge.models import Comment
from tests.forge.conftest import GitHubSetup
from tests.forge.gitrepo import commit_file, git
from tests.forge.test_github import open_pr
from tests.pr.test_plan import RELEASE, denv

OLD, NEW = "a" * 40, "b" * 40
T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("body", "recorded", "head", "refusal"),
    [
        ("/denv bench", OLD, OLD, None),
        ("/denv bench", OLD, NEW, f"commented on {OLD[:12]}, but the head is now {NEW[:12]}"),
        (f"/denv bench {NEW}", OLD, NEW, None),  # names the new head: it runs there
        (f"/denv plan {OLD}", None, NEW, f"on {OLD[:12]}, but the head is now {NEW[:12]}"),
        ("/denv plan", None, NEW, f"comment `/denv plan {NEW}` to run on the head"),
        ("/denv bench bbbbbbb", OLD, NEW, "`bbbbbbb` is a prefix, and a prefix can be forged"),
        (f"/denv bench {NEW[:39]}", None, NEW, "name the commit in full (40 hex digits)"),
    ],
    ids=[
        "same-head",
        "head-moved",
        "names-new-head",
        "names-old-head",
        "head-unknown",
        "names-a-prefix",
        "names-39-digits",
    ],
)
def test_a_command_runs_only_on_the_commit_it_was_given_on(
    body: str, recorded: str | None, head: str, refusal: str | None
) -> None:
    comment = Comment(id=1, author="grace", body=body, at=T0, head_sha=recorded)
    [command] = comment_commands([comment], lambda user: True)
    why = head_moved(command, head)
    if refusal is None:
        assert why is None
    else:
        assert why is not None and why.startswith("refused: ") and refusal in why


def _plan_pr(repo: Path) -> tuple[int, str]:
    text = (repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 96")
    git(repo, "checkout", "-q", "-b", "smaller-batch")
    head = commit_file(repo, RELEASE, text, "chat-8b: max_batch 96")
    git(repo, "checkout", "-q", "main")
    return LocalForge(repo).open_pr("smaller-batch", "chat-8b: max_batch 96").number, head


def test_a_command_commented_before_a_push_is_refused_naming_both_heads(git_repo: Path) -> None:
    number, commented = _plan_pr(git_repo)
    forge = LocalForge(git_repo)
    asked = forge.comment(number, "/denv plan", author="grace").id
    git(git_repo, "checkout", "-q", "smaller-batch")  # then a commit nobody asked about
    text = (git_repo / RELEASE).read_text().replace("max_batch: 96", "max_batch: 64")
    pushed = commit_file(git_repo, RELEASE, text, "chat-8b: max_batch 64")
    git(git_repo, "checkout", "-q", "main")

    run = denv(git_repo, "commands", "--pr", str(number), "--json")
    assert run.returncode == 0, run.stderr
    [ran] = json.loads(run.stdout)["ran"]
    assert ran["comment_id"] == asked
    assert ran["outcome"] == (
        f"refused: commented on {commented[:12]}, but the head is now {pushed[:12]}; "
        "comment again to run on the new head"
    )
    assert forge.checks(pushed) == [] and forge.checks(commented) == []  # nothing planned
    listing = [c.body for c in forge.comments(number) if c.author == forge.bot.name]
    assert len(listing) == 1 and f"commented on {commented[:12]}" in listing[0]

    # asked again on the new head, it runs there
    forge.comment(number, "/denv plan", author="grace")
    run = denv(git_repo, "commands", "--pr", str(number), "--json")
    assert run.returncode == 0, run.stderr
    [ran] = json.loads(run.stdout)["ran"]
    assert ran["outcome"].startswith("check 'denv plan' success")
    assert [c.name for c in forge.checks(pushed)] == ["denv plan"]


def test_on_github_a_command_names_its_commit(github: GitHubSetup) -> None:
    number, head = open_pr(github)
    github.fake.comment(number, "grace", "/denv bench")
    github.fake.comment(number, "grace", f"/denv plan {head}")
    commands = github.forge.comment_commands(number)
    assert [(c.command, c.head_sha) for c in commands] == [
        ("bench", None),
        ("plan", head),
    ]
    unnamed, named = (head_moved(c, head) for c in commands)
    assert named is None
    assert unnamed is not None and f"`/denv bench {head}`" in unnamed
