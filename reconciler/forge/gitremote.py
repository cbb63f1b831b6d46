"""Adapter: the bot's branch on a remote (GitHub) with pygit2: fetch, then push.

The bot works in a local clone: it fetches the base and its branch into private refs
(`refs/denv/remote/…`), writes its commit there (botgit.py), and pushes without force, so a
commit someone pushed in the meantime makes git reject the push instead of being lost.
Over HTTPS the token goes to git as the password of `x-access-token`, in memory only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pygit2

from reconciler.errors import ForgeError

_PRIVATE = "refs/denv/remote"


class _Callbacks(pygit2.RemoteCallbacks):
    def __init__(self, token: Callable[[], str | None]) -> None:
        super().__init__()
        self._token = token
        self._asked = 0
        self.rejected: dict[str, str] = {}

    def credentials(
        self, url: str, username_from_url: str | None, allowed_types: object
    ) -> pygit2.UserPass:
        self._asked += 1
        token = self._token()
        if token is None or self._asked > 1:  # libgit2 asks again after a refusal: stop there
            raise ForgeError("the git server refused the bot's credentials")
        return pygit2.UserPass("x-access-token", token)

    def push_update_reference(self, refname: str, message: str | None) -> None:
        if message:
            self.rejected[refname] = message


@dataclass
class GitRemote:
    clone: Path  # a local clone of the repository; the bot only adds objects and private refs
    url: str  # e.g. https://github.com/org/repo.git
    token: Callable[[], str | None] = lambda: None

    def __repr__(self) -> str:  # no token, whatever `token` closes over
        return f"GitRemote({self.clone}, {self.url})"

    def _open(self) -> tuple[pygit2.Repository, pygit2.Remote]:
        try:
            repo = pygit2.Repository(str(self.clone))
        except pygit2.GitError as exc:
            raise ForgeError(f"{self.clone}: not a git repository ({exc})") from exc
        return repo, repo.remotes.create_anonymous(self.url)

    def fetch(self, *branches: str) -> tuple[pygit2.Repository, dict[str, pygit2.Oid]]:
        """The clone and the remote tips of those of `branches` that exist there."""
        repo, remote = self._open()
        try:
            heads = {h.name: h.oid for h in remote.list_heads(callbacks=_Callbacks(self.token))}
            wanted = [b for b in branches if f"refs/heads/{b}" in heads]
            if wanted:
                specs = [f"+refs/heads/{b}:{_PRIVATE}/{b}" for b in wanted]
                remote.fetch(specs, callbacks=_Callbacks(self.token))
        except pygit2.GitError as exc:
            raise ForgeError(f"cannot fetch from {self.url}: {exc}") from exc
        return repo, {b: heads[f"refs/heads/{b}"] for b in wanted}

    def push(self, repo: pygit2.Repository, branch: str, commit: pygit2.Oid) -> None:
        """Move the remote branch to `commit`, a descendant of its tip: never a force push."""
        local = f"{_PRIVATE}/{branch}"
        repo.references.create(local, commit, force=True)
        callbacks = _Callbacks(self.token)
        remote = repo.remotes.create_anonymous(self.url)
        try:
            remote.push([f"{local}:refs/heads/{branch}"], callbacks=callbacks)
        except pygit2.GitError as exc:
            raise ForgeError(
                f"push of '{branch}' to {self.url} refused ({exc}); someone may have pushed "
                "to it meanwhile: run again"
            ) from exc
        if callbacks.rejected:
            reasons = "; ".join(callbacks.rejected.values())
            raise ForgeError(f"push of '{branch}' to {self.url} rejected: {reasons}")
