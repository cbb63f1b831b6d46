"""The bot's pull requests found on GitHub by branch (the fake, over PyGithub): one whose head
the default branch holds is closed with a comment saying why, whoever's else is left alone;
and a pass stopped between the push of the bot's branch and the opening of its pull request
is completed by the next one without a second commit."""

from __future__ import annotations

import pytest

from reconciler.errors import ForgeError
from reconciler.forge.markers import read_marker
from reconciler.forge.models import PrState
from reconciler.forge.sweep import sweep
from tests.forge.conftest import GitHubSetup
from tests.forge.gitrepo import git
from tests.forge.test_github import _change, open_pr

BRANCH = "denv/optimize-chat-8b"


def test_a_bot_pr_whose_head_is_in_main_is_closed(github: GitHubSetup) -> None:
    bot = github.forge.open_or_update_bot_pr(_change(256))
    theirs, _ = open_pr(github)
    work = github.work
    git(work, "fetch", "-q", "origin")
    for head in (BRANCH, "bigger-batch"):  # both land on main outside their pull requests
        git(work, "merge", "-q", "--no-edit", f"origin/{head}", "-X", "theirs")
    git(work, "push", "-q", "origin", "main")
    said: list[str] = []
    swept = sweep(github.forge, said.append)
    assert [pr.number for pr in swept.closed] == [bot.number] and swept.errors == []
    assert said == [f"forge: closed #{bot.number} ({BRANCH}): its head is in main"]
    pull = github.fake.pulls[bot.number]
    assert (pull["state"], pull["merged"]) == ("closed", False)
    [body] = github.fake.comment_bodies(bot.number)
    assert read_marker(body) == ("closed", 1)
    assert f"its head `{bot.head_sha[:12]}` is in `main` already" in body
    assert github.forge.pull_request(theirs).state == PrState.OPEN  # not the bot's
    writes = [r for r in github.fake.requests if r.startswith(("PATCH", "POST"))]
    assert sweep(github.forge, said.append).closed == []  # nothing left: nothing written
    assert [r for r in github.fake.requests if r.startswith(("PATCH", "POST"))] == writes


def test_a_bot_pr_not_in_main_stays_open(github: GitHubSetup) -> None:
    bot = github.forge.open_or_update_bot_pr(_change(256))
    assert sweep(github.forge, lambda line: None).closed == []
    assert github.forge.pull_request(bot.number).state == PrState.OPEN


def test_pushed_but_not_opened_is_opened_next_pass_without_a_second_commit(
    github: GitHubSetup,
) -> None:
    github.fake.fail("POST", r"/pulls$", 502, times=6)  # every attempt of this pass
    with pytest.raises(ForgeError):
        github.forge.open_or_update_bot_pr(_change(256))
    pushed = git(github.remote, "rev-parse", BRANCH)
    assert github.fake.pulls == {}
    pr = github.forge.open_or_update_bot_pr(_change(256))
    assert pr.head_sha == pushed == git(github.remote, "rev-parse", BRANCH)
    assert len(github.fake.pulls) == 1
