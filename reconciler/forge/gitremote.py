"""Adapter: the bot's branch on a remote (GitHub), through the git adapter: fetch, then push.

The bot works in a local clone: it fetches the base and its branch into private refs
(`refs/denv/remote/…`), writes its commit there (botgit.py), and pushes without force, so a
commit someone pushed in the meantime makes git reject the push instead of being lost.
Over HTTPS the token goes to git as the password of `x-access-token`, in memory only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reconciler.adapters.git import CredentialsRefused, GitFailure, GitRepo
from reconciler.errors import ForgeError

_PRIVATE = "refs/denv/remote"


@dataclass
class GitRemote:
    clone: Path  # a local clone of the repository; the bot only adds objects and private refs
    url: str  # e.g. https://github.com/org/repo.git
    token: Callable[[], str | None] = lambda: None

    def __repr__(self) -> str:  # no token, whatever `token` closes over
        return f"GitRemote({self.clone}, {self.url})"

    def fetch(self, *branches: str) -> tuple[GitRepo, dict[str, str]]:
        """The clone and the remote tips of those of `branches` that exist there."""
        repo = GitRepo.open(self.clone, ForgeError)
        try:
            heads = repo.remote_heads(self.url, self.token)
            wanted = [b for b in branches if b in heads]
            if wanted:
                specs = [f"+refs/heads/{b}:{_PRIVATE}/{b}" for b in wanted]
                repo.fetch(self.url, specs, self.token)
        except CredentialsRefused as exc:
            raise ForgeError(str(exc)) from exc
        except GitFailure as exc:
            raise ForgeError(f"cannot fetch from {self.url}: {exc}") from exc
        return repo, {b: heads[b] for b in wanted}

    def push(self, repo: GitRepo, branch: str, commit: str) -> None:
        """Move the remote branch to `commit`, a descendant of its tip: never a force push."""
        try:
            rejected = repo.push(self.url, f"{_PRIVATE}/{branch}", commit, branch, self.token)
        except CredentialsRefused as exc:
            raise ForgeError(str(exc)) from exc
        except GitFailure as exc:
            raise ForgeError(
                f"push of '{branch}' to {self.url} refused ({exc}); someone may have pushed "
                "to it meanwhile: run again"
            ) from exc
        if rejected:
            raise ForgeError(f"push of '{branch}' to {self.url} rejected: {'; '.join(rejected)}")
