"""A bot killed between two steps of a promotion on the local forge — its branch moved, the
pull request's record written, the check set, the merge commit on main, the merged record —
with a real SIGKILL of a process running the pass at that point. The next pass finds its pull
request on the forge by branch, completes it or closes it, and never commits twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.forge.local import LocalForge
from reconciler.forge.markers import read_marker
from reconciler.forge.models import PrState
from reconciler.rollout.bot import RolloutBot
from tests.forge.gitrepo import git
from tests.reconcile.conftest import GitRepo, git_repo
from tests.rollout.test_promote import snap_of

__all__ = ["git_repo"]  # the fixture

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "releases/chat-8b/denv.yaml"
BRANCH = "denv/promote/chat-8b/prod"

# One pass of the bot as the reconciler runs it (the rollout's check, then the promotion of a
# green canary, opened and merged in the same pass: prod needs no approval here), killed with
# SIGKILL right after the named step. What the pass keeps is never written: the bot's note
# is saved after the pass.
PASS = """
import os, signal, sys
from pathlib import Path
from reconciler.adapters.git import GitRepo as Git
from reconciler.forge.local import LocalForge
from reconciler.forge.localstore import LocalStore
from reconciler.forge.models import PrState
from reconciler.rollout.bot import RolloutBot
from reconciler.rollout.promote import Promoter
from tests.reconcile.conftest import GitRepo
from tests.rollout.test_promote import green, snap_of

path, cache, point, revision, now = sys.argv[1:6]
repo = GitRepo(Path(path), Path(cache))
snap, revisions = snap_of(repo)

def kill_after(owner, name, when=lambda *args: True):
    step = getattr(owner, name)
    def then_die(self, *args):
        step(self, *args)
        if when(*args):
            os.kill(os.getpid(), signal.SIGKILL)
    setattr(owner, name, then_die)

if point == "branch":
    kill_after(Git, "set_branch")
elif point == "open":
    kill_after(LocalStore, "save", lambda pr: pr.state == PrState.OPEN)
elif point == "check":
    kill_after(LocalStore, "save_checks")
elif point == "merge":  # main moved to the merge commit; the record still says open
    kill_after(Git, "move_ref")
elif point == "record":
    kill_after(LocalStore, "save", lambda pr: pr.state == PrState.MERGED)
forge = LocalForge(repo.path)
RolloutBot(revisions, lambda: forge, print).check(snap, {}, {})
kept = green(revision)
Promoter(revisions, lambda: forge, print).promotions(
    snap, "chat-8b", snap.repo.releases["chat-8b"], kept, {}, float(now)
)
print("promotion:", kept.stages["chat-8b/canary"].promotion)
"""


def run_pass(
    repo: GitRepo, revision: str, point: str = "", now: float = 1.0e9 + 600
) -> subprocess.CompletedProcess[str]:
    """One pass at `now` (the canary baked green at 1.0e9 + 600), killed after `point`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [str(repo.path), str(repo.cache), point or "none", revision, repr(now)]
    return subprocess.run(
        [sys.executable, "-c", PASS, *args],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )  # fmt: skip


def log(repo: GitRepo) -> list[str]:
    """The subject of each commit on main (with its author, for the bot's), newest first."""
    lines = git(repo.path, "log", "--format=%s\t%an", "main").splitlines()
    pairs = [line.split("\t") for line in lines]
    return [f"{subject} (denv-bot)" if who == "denv-bot" else subject for subject, who in pairs]


@pytest.fixture
def canary_green(git_repo: GitRepo) -> tuple[GitRepo, str]:
    """prod needs no approval; the canary runs (and is green at) the first revision."""
    git_repo.replace(RELEASE, "    approvals: 1", "    approvals: 0")
    return git_repo, git_repo.commit("prod: no approval needed")


@pytest.mark.parametrize("point", ["branch", "open", "check", "merge", "record"])
def test_a_pass_killed_after_any_step_is_picked_up_by_the_next(
    canary_green: tuple[GitRepo, str], point: str
) -> None:
    repo, revision = canary_green
    before = log(repo)
    killed = run_pass(repo, revision, point)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    done = run_pass(repo, revision, now=1.0e9 + 660)  # a later pass: its clock moved on
    assert done.returncode == 0, done.stdout + done.stderr
    again = run_pass(repo, revision, now=1.0e9 + 720)  # a pass after that changes nothing
    assert again.returncode == 0, again.stdout + again.stderr
    after = log(repo)
    assert after[len(after) - len(before) :] == before
    assert after[: len(after) - len(before)] == [
        f"Merge pull request #1 from {BRANCH}",
        f"chat-8b: promote {revision[:12]} to prod (denv-bot)",
    ]  # one commit for the change, and one merge of it
    forge = LocalForge(repo.path)
    assert forge.pull_requests(PrState.OPEN) == []
    [pr] = forge.pull_requests(PrState.MERGED) + forge.pull_requests(PrState.CLOSED)
    assert pr.head_branch == BRANCH and pr.head_sha == git(repo.path, "rev-parse", BRANCH)


def test_the_next_pass_closes_a_merged_pr_it_never_recorded(
    canary_green: tuple[GitRepo, str],
) -> None:
    """Killed between the forge's merge and its record (and before the bot's note): the bot
    does not remember the pull request; it finds it on the forge by its branch."""
    repo, revision = canary_green
    killed = run_pass(repo, revision, "merge")
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    forge = LocalForge(repo.path)
    [pr] = forge.pull_requests()  # the record says open; its head is in main
    main = git(repo.path, "rev-parse", "main")
    assert git(repo.path, "merge-base", "--is-ancestor", pr.head_sha, main) == ""
    said: list[str] = []
    snap, revisions = snap_of(repo)
    RolloutBot(revisions, lambda: forge, said.append).check(snap, {}, {})
    assert forge.pull_request(pr.number).state == PrState.CLOSED
    assert git(repo.path, "rev-parse", "main") == main  # nothing committed
    [comment] = forge.comments(pr.number)
    assert read_marker(comment.body) == ("closed", 1)
    assert f"its head `{pr.head_sha[:12]}` is in `main` already" in comment.body
    assert said == [f"forge: closed #{pr.number} ({BRANCH}): its head is in main"]
