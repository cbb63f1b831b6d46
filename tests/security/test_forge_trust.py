"""The attacker's reproductions against the forges: real git repositories, real `ssh-keygen`
keys and signatures, `denv pr …` run as a person runs it.

- mallory opened a local pull request as "bob" (git config user.name), approved it herself
  with her own key, and merged it;
- one key under two names in the allowed signers opened a pull request under one and
  approved it under the other;
- allowed signers added on a pull request's base branch (not the default branch) counted;
- `/denv bench abc1234`: a 7-digit prefix, forged by brute force in under a minute, ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.forge.commands import head_moved
from reconciler.forge.local import LocalForge
from tests.forge.conftest import GitHubSetup, git_repo, github
from tests.forge.gitrepo import commit_file, git
from tests.forge.sshkeys import SIGNERS, allow, new_key, signer_line
from tests.forge.test_github import open_pr
from tests.pr.test_plan import RELEASE, branch, denv

KEYS = ("ada", "bob", "grace", "mallory")
__all__ = ["git_repo", "github"]  # the forge tests' fixtures: a real repository, a fake GitHub


@pytest.fixture
def keys(git_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Keys of ada, bob, grace and mallory, each listed under their own name on main."""
    folder = tmp_path_factory.mktemp("keys")
    made = {name: new_key(folder, name) for name in KEYS}
    allow(git_repo, made)
    return made


def _change(repo: Path, name: str = "bigger-batch") -> str:
    text = (repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    return branch(repo, name, RELEASE, text)


def test_mallory_cannot_open_as_bob_then_approve_and_merge_herself(
    git_repo: Path, keys: dict[str, Path]
) -> None:
    main = git(git_repo, "rev-parse", "main")
    _change(git_repo)
    git(git_repo, "config", "user.name", "bob")  # mallory's clone says she is bob
    git(git_repo, "config", "user.signingKey", str(keys["mallory"]))
    opened = denv(git_repo, "open", "--head", "bigger-batch", "--json")
    assert opened.returncode == 0, opened.stderr
    assert json.loads(opened.stdout)["author"] == "bob"

    approved = denv(git_repo, "approve", "1", "--as", "mallory", "--json")
    assert approved.returncode == 0, approved.stderr
    approvals = json.loads(approved.stdout)["approvals"]
    assert approvals["counted"] == []
    assert approvals["opening"] == (f"its opening is not signed by bob's key by {SIGNERS} on main")
    merged = denv(git_repo, "merge", "1")
    assert merged.returncode == 1
    assert "cannot merge yet" in merged.stderr and "not signed by bob's key" in merged.stderr
    assert git(git_repo, "rev-parse", "main") == main  # nothing merged


def test_one_key_under_two_names_cannot_approve_what_it_opened(
    git_repo: Path, keys: dict[str, Path]
) -> None:
    """The opener is a key, not a name: an approval by the opening key never counts."""
    line = signer_line("mallory,mal", keys["mallory"])  # the same key under two principals
    commit_file(git_repo, SIGNERS, (git_repo / SIGNERS).read_text() + line, "mal too")
    main = git(git_repo, "rev-parse", "main")
    _change(git_repo)
    _open_as(git_repo, "mallory", keys["mallory"])
    approved = denv(git_repo, "approve", "1", "--as", "mal", "--json")
    assert approved.returncode == 0, approved.stderr
    approvals = json.loads(approved.stdout)["approvals"]
    assert approvals["counted"] == [] and approvals["opening"] is None
    assert approvals["ignored"] == [
        {"user": "mal", "reason": "signed by the key that opened the pull request: its author's"}
    ]
    assert denv(git_repo, "merge", "1").returncode == 1
    assert git(git_repo, "rev-parse", "main") == main

    # another person's signed approval counts, and merges it
    grace = denv(git_repo, "approve", "1", "--as", "grace", "--key", str(keys["grace"]))
    assert grace.returncode == 0, grace.stderr
    merged = denv(git_repo, "merge", "1")
    assert merged.returncode == 0, merged.stderr


def test_allowed_signers_on_a_base_branch_count_for_nothing(
    git_repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """mallory makes a base branch whose allowed signers list her, and opens a pull request
    into it: only the default branch says whose key signs for whom."""
    folder = tmp_path_factory.mktemp("keys")
    ada, mallory = new_key(folder, "ada"), new_key(folder, "mallory")
    allow(git_repo, {"ada": ada})  # main: ada only
    git(git_repo, "checkout", "-q", "-b", "evil-base")
    text = (git_repo / SIGNERS).read_text() + signer_line("mallory", mallory)
    commit_file(git_repo, SIGNERS, text, "mallory may approve")
    _change_from(git_repo, "evil-base")
    _open_as(git_repo, "ada", ada, "--base", "evil-base")
    approved = denv(git_repo, "approve", "1", "--as", "mallory", "--key", str(mallory), "--json")
    assert approved.returncode == 0, approved.stderr
    approvals = json.loads(approved.stdout)["approvals"]
    assert approvals["counted"] == []
    assert approvals["opening"] is None  # ada's opening, by main's signers
    assert approvals["ignored"] == [
        {"user": "mallory", "reason": f"its signature is not mallory's by {SIGNERS} on main"}
    ]


def _open_as(repo: Path, name: str, key: Path, *args: str) -> None:
    """`denv pr open` of bigger-batch by `name`, whose git config signs with `key`."""
    git(repo, "config", "user.name", name)
    git(repo, "config", "user.signingKey", str(key))
    opened = denv(repo, "open", "--head", "bigger-batch", *args)
    assert opened.returncode == 0, opened.stderr


def _change_from(repo: Path, base: str) -> None:
    git(repo, "checkout", "-q", "-b", "bigger-batch", base)
    text = (repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    commit_file(repo, RELEASE, text, "chat-8b: max_batch 192")
    git(repo, "checkout", "-q", "main")


def test_a_command_naming_a_prefix_is_refused_not_run(
    git_repo: Path, keys: dict[str, Path]
) -> None:
    head = _change(git_repo)
    _open_as(git_repo, "ada", keys["ada"])
    forge = LocalForge(git_repo)
    asked = forge.comment(1, f"/denv bench {head[:7]}", author="grace").id
    run = denv(git_repo, "commands", "--pr", "1", "--json")
    assert run.returncode == 0, run.stderr
    [ran] = json.loads(run.stdout)["ran"]
    assert ran["comment_id"] == asked
    assert ran["outcome"] == (
        f"refused: `{head[:7]}` is a prefix, and a prefix can be forged; name the commit in "
        f"full (40 hex digits): `/denv bench {head}` to run on the head"
    )
    assert forge.checks(head) == []  # nothing benched

    forge.comment(1, f"/denv plan {head}", author="grace")  # named in full, it runs
    run = denv(git_repo, "commands", "--pr", "1", "--json")
    assert run.returncode == 0, run.stderr
    [ran] = json.loads(run.stdout)["ran"]
    assert ran["outcome"].startswith("check 'denv plan' success")


def test_on_github_a_prefix_is_refused(github: GitHubSetup) -> None:
    number, head = open_pr(github)
    github.fake.comment(number, "grace", f"/denv bench {head[:7]}")
    [command] = github.forge.comment_commands(number)
    why = head_moved(command, head)
    assert why is not None and why.startswith(f"refused: `{head[:7]}` is a prefix")
