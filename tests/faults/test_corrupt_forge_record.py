"""A local-forge record garbled on disk (NUL bytes over its end): unreadable, neither absent nor
a crash. `denv pr list` names the file and exits 1 (never a traceback), a bot pass says it and
goes on, the pull request it belongs to is left alone — and no second pull request is opened
for a branch whose record it may be — until `denv pr repair` sets the file aside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.forge.local import LocalForge
from reconciler.forge.localstore import UnreadableRecord
from reconciler.forge.models import PrState
from reconciler.forge.protocol import BotChange, BotFiles
from reconciler.forge.sweep import sweep
from reconciler.rollout.promote import Promoter
from tests.reconcile.conftest import GitRepo, git_repo
from tests.rollout.test_promote import green, snap_of
from tests.rollout.test_promotion import denv

__all__ = ["git_repo"]  # the fixture

RELEASE = "releases/chat-8b/denv.yaml"


def batch(branch: str, value: int) -> BotChange:
    def edit(files: BotFiles) -> None:
        files.yaml(RELEASE).set(["release", "overrides", "settings", "max_batch"], value)

    title = f"chat-8b: max_batch {value}"
    return BotChange(branch=branch, title=title, body="", message=title, edit=edit)


@pytest.fixture
def garbled(git_repo: GitRepo) -> tuple[GitRepo, LocalForge, Path, bytes]:
    """Two bot pull requests; the record of #1 garbled."""
    forge = LocalForge(git_repo.path, user="ada")
    forge.open_or_update_bot_pr(batch("deploy/chat-8b-256", 256))
    forge.open_or_update_bot_pr(batch("deploy/chat-8b-320", 320))
    record = git_repo.path / ".git" / "denv-forge" / "prs" / "1.json"
    data = record.read_bytes()[:60] + b"\0" * 16
    record.write_bytes(data)
    return git_repo, forge, record, data


def test_pr_list_names_the_file_and_exits_1(
    garbled: tuple[GitRepo, LocalForge, Path, bytes],
) -> None:
    repo, _, record, data = garbled
    listed = denv(repo, "pr", "list")
    assert listed.returncode == 1, listed.stdout + listed.stderr
    assert "Traceback" not in listed.stderr and "bug" not in listed.stderr
    assert (
        f"{record}: the record of local pull request #1 is unreadable (76 bytes with NUL bytes)"
        in listed.stderr
    )
    assert "denv pr repair 1" in listed.stderr
    assert "chat-8b: max_batch 320" in listed.stdout  # the readable one is still listed
    as_json = denv(repo, "pr", "list", "--json")
    assert as_json.returncode == 1
    answer = json.loads(as_json.stdout)
    assert [pr["number"] for pr in answer["pull_requests"]] == [2]
    [problem] = answer["unreadable"]
    assert problem.startswith(f"{record}: ")
    shown = denv(repo, "pr", "show", "1")
    assert shown.returncode == 1 and str(record) in shown.stderr
    assert record.read_bytes() == data  # left alone


def test_a_bot_pass_says_it_and_goes_on(garbled: tuple[GitRepo, LocalForge, Path, bytes]) -> None:
    repo, forge, record, data = garbled
    said: list[str] = []
    swept = sweep(forge, said.append)
    assert swept.errors == [] and [str(record) in line for line in said] == [True]
    # a promotion opens no pull request while a record it cannot read may be its branch's
    snap, revisions = snap_of(repo)
    kept = green(str(repo.git.head.target))
    Promoter(revisions, lambda: forge, said.append).promotions(
        snap, "chat-8b", snap.repo.releases["chat-8b"], kept, {}, 1.0e9 + 600
    )
    [error] = kept.stages["chat-8b/canary"].errors
    assert error.startswith(f"promotion to prod: {record}: the record of local pull request #1")
    assert [pr.number for pr in forge.pull_requests()] == [2]
    with pytest.raises(UnreadableRecord):
        forge.open_pr("deploy/chat-8b-256", "a second one")
    assert forge.open_or_update_bot_pr(batch("deploy/chat-8b-320", 384)).number == 2
    assert record.read_bytes() == data


def test_repair_sets_the_file_aside_and_records_it_closed(
    garbled: tuple[GitRepo, LocalForge, Path, bytes],
) -> None:
    repo, forge, record, data = garbled
    repaired = denv(repo, "pr", "repair", "1", "--json")
    assert repaired.returncode == 0, repaired.stderr
    [kept] = record.parent.glob("1.json.unreadable-*")
    assert kept.read_bytes() == data and json.loads(repaired.stdout)["kept"] == str(kept)
    assert denv(repo, "pr", "list").returncode == 0
    [lost] = forge.pull_requests(PrState.CLOSED)
    assert lost.number == 1 and lost.title.startswith("(record lost")
    again = denv(repo, "pr", "repair", "1")
    assert again.returncode == 1 and "nothing to repair" in again.stderr
    # its branch is the bot's again: a new pull request, never #1 reused
    assert forge.open_or_update_bot_pr(batch("deploy/chat-8b-256", 256)).number == 3
