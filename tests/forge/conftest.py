"""Fixtures of the forge tests: a denv repository under git, and GitHub faked on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reconciler.forge.github import GitHubForge, token_auth
from reconciler.forge.gitremote import GitRemote
from reconciler.forge.retry import RetryPolicy
from tests.forge.fake_github import FakeGitHub
from tests.forge.gitrepo import git, init_repo
from tests.forge.loopback import LoopbackServer

# Shaped like a real token so that any leak is easy to grep for.
TOKEN = "ghp_DenvTestToken0123456789abcdefNEVERLOG"
NOW = 1_750_000_000.0


@pytest.fixture
def git_repo(denv_repo: Path) -> Path:
    return init_repo(denv_repo)


@dataclass
class Clock:
    """Sleeps recorded, never slept; time moves only when a sleep says so."""

    now: float = NOW
    sleeps: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def time(self) -> float:
        return self.now


@dataclass
class GitHubSetup:
    fake: FakeGitHub
    forge: GitHubForge
    clock: Clock
    work: Path  # a person's clone, pushing to the remote
    remote: Path  # the bare repository that stands for GitHub's git side

    def forge_as(self, token: str) -> GitHubForge:
        return make_forge(self.fake, token, self.clock, self.forge.git)


def make_forge(fake: FakeGitHub, token: str, clock: Clock, remote: GitRemote | None) -> GitHubForge:
    return GitHubForge(
        fake.full_name,
        token_auth(token),
        api_url=fake.api_url,
        git=remote,
        retry=RetryPolicy(backoff=0.5, sleep=clock.sleep, clock=clock.time),
        bot_login=fake.tokens.get(token),
        throttle=False,
    )


@pytest.fixture
def github(git_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitHubSetup]:
    scratch = tmp_path_factory.mktemp("github")
    remote = scratch / "remote.git"
    git(scratch, "clone", "-q", "--bare", str(git_repo), str(remote))
    git(git_repo, "remote", "add", "origin", str(remote))
    bot_clone = scratch / "bot"
    git(scratch, "clone", "-q", str(remote), str(bot_clone))
    fake = FakeGitHub(
        bare=remote,
        tokens={TOKEN: "denv-bot", "ghp_grace": "grace", "ghp_mallory": "mallory"},
        permissions={"denv-bot": "write", "ada": "write", "grace": "admin", "mallory": "read"},
    )
    server = LoopbackServer(fake.handle)
    fake.url = server.url
    clock = Clock()
    forge = make_forge(fake, TOKEN, clock, GitRemote(bot_clone, str(remote), lambda: TOKEN))
    try:
        yield GitHubSetup(fake, forge, clock, git_repo, remote)
    finally:
        server.close()
    if fake.unexpected:
        pytest.fail(
            "the fake GitHub got requests it does not answer, or GitHub does not document,"
            " or gave answers GitHub's description does not allow:\n"
            + "\n".join(f"- {u}" for u in fake.unexpected)
        )
