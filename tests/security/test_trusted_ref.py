"""The trusted ref is the default branch, never a pull request's base. Reproduced: an author
pushed a branch `evil-base` whose fleet pointed at his host with `weights.token_env:
GITHUB_TOKEN`, opened a pull request into it, and `denv pr bench` sent the runner's token to
his host. Now such a pull request is planned against the default branch's fleets, and
neither `denv pr bench` nor `/denv bench` starts a trial or connects to any host."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.forge.local import LocalForge
from tests.forge.gitrepo import commit_file, git, init_repo
from tests.forge.sshkeys import sign_openings
from tests.pr.test_plan import RELEASE, denv
from tests.pr.test_trust import FLEET, Listener, hostile_fleet

TOKEN = "ghp_RunnerToken0123456789abcdefNEVERSENT"


@pytest.fixture
def repo(denv_repo: Path) -> Path:
    return init_repo(denv_repo)


@pytest.fixture
def listener() -> Iterator[Listener]:
    """The attacker's host: a port on loopback that counts who connects to it."""
    found = Listener()
    yield found
    found.close()


def _evil_base(repo: Path, port: int) -> None:
    """Branch `evil-base` with a fleet at the attacker's port that asks for GITHUB_TOKEN, and
    a pull request into it from `evil` that changes a release (something to bench)."""
    fleet = hostile_fleet(port).replace(
        "  trial_gpus: 8\n", "  trial_gpus: 8\n  weights: { token_env: GITHUB_TOKEN }\n"
    )
    git(repo, "checkout", "-q", "-b", "evil-base")
    commit_file(repo, FLEET, fleet, "evil-base: my host, with the runner's token")
    git(repo, "checkout", "-q", "-b", "evil")
    release = (repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    commit_file(repo, RELEASE, release, "chat-8b: a bigger batch")
    git(repo, "checkout", "-q", "main")
    sign_openings(repo)
    opened = denv(repo, "open", "--head", "evil", "--base", "evil-base")
    assert opened.returncode == 0, opened.stderr


def _nowhere(repo: Path, *outputs: str) -> None:
    """The token is in no output, no comment, no check and no file denv wrote."""
    assert all(TOKEN not in text for text in outputs)
    state = repo.parent / f"{repo.name}-state"
    for folder in (repo / ".git" / "denv-forge", state):
        for path in folder.rglob("*") if folder.is_dir() else ():
            if path.is_file():
                assert TOKEN.encode() not in path.read_bytes(), path


def test_a_pull_request_into_another_base_benches_nothing(repo: Path, listener: Listener) -> None:
    _evil_base(repo, listener.port)
    env = {"GITHUB_TOKEN": TOKEN}

    run = denv(repo, "bench", "--pr", "1", "--requests", "2", "--json", env=env)

    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert answer["runs"] == []
    check = answer["check"]
    assert check["conclusion"] == "neutral"
    assert check["title"] == "not benched: its base, evil-base, is not the default branch"
    assert listener.accepted == 0
    [bench] = [c.body for c in LocalForge(repo).comments(1) if "denv:bench" in c.body]
    assert "base, `evil-base`, is not the default branch `main`" in bench

    # `/denv bench` from a maintainer: the same refusal, through the commands path
    forge = LocalForge(repo)
    forge.comment(1, "/denv bench", author="grace")
    ran = denv(repo, "commands", "--pr", "1", "--requests", "2", "--json", env=env)
    assert ran.returncode == 0, ran.stderr
    [handled] = json.loads(ran.stdout)["ran"]
    assert handled["outcome"].startswith("check 'denv bench' neutral: not benched")
    assert listener.accepted == 0
    _nowhere(repo, run.stdout, run.stderr, ran.stdout, ran.stderr)


def test_a_pull_request_into_another_base_is_planned_on_the_default_branch(
    repo: Path, listener: Listener
) -> None:
    _evil_base(repo, listener.port)

    run = denv(repo, "plan", "--pr", "1", "--json", env={"GITHUB_TOKEN": TOKEN})

    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert listener.accepted == 0
    assert answer["problems"] == [] == answer["unplaceable"]
    hosts = {action["host"] for action in answer["plan"]["actions"]}
    assert hosts == {"localhost"}  # main's local fleet, not the attacker's host
    [plan] = [c.body for c in LocalForge(repo).comments(1) if "denv:plan" in c.body]
    assert "### denv plan for" in plan and "against `main`" in plan
    assert "is not the default branch `main`" in plan
    _nowhere(repo, run.stdout, run.stderr)


def test_approvals_count_by_the_default_branch_not_the_base(repo: Path) -> None:
    """A base branch that lowers the approvals it asks does not lower them."""
    gates = (repo / "policies/gates.yaml").read_text()
    git(repo, "checkout", "-q", "-b", "lax-base")
    commit_file(
        repo,
        "policies/gates.yaml",
        gates.replace("default_approvals: 1 ", "default_approvals: 0 "),
        "lax-base: no approvals",
    )
    git(repo, "checkout", "-q", "-b", "feature")
    release = (repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    commit_file(repo, RELEASE, release, "chat-8b: a bigger batch")
    git(repo, "checkout", "-q", "main")
    sign_openings(repo)
    assert denv(repo, "open", "--head", "feature", "--base", "lax-base").returncode == 0

    shown = denv(repo, "show", "1")

    assert shown.returncode == 0, shown.stderr
    assert "approvals: 0 of 1" in shown.stdout
