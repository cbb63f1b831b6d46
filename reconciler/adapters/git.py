"""Adapter: git, with pygit2 — the only module that imports it.

Commits, trees and blobs are named by their hex ids (`str`) and read through `Snapshot`, a
commit's files; nothing of pygit2 crosses this module's edge. What denv does with git:
read a commit's files without a checkout (spec, reconcile), walk first-parent history
(release revisions, pins), find a merge base and the paths a head changes, write commits
from files in memory (the bot, `denv deploy --commit`, the local forge's merge), and fetch
and push a remote branch with a token (the GitHub forge's bot) or clone a remote bare.

It lives outside the layers (`reconciler/adapters/`, see its `__init__`): spec, the lowest
layer, reads commits, and the forge, reconcile and optimize above it use the same git; so it
imports nothing of `reconciler` but `errors`. A work tree's reader (spec/sources.py) imports
it only when it reads a commit: a command that reads a work tree needs no git (start-up).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.enums import CheckoutStrategy, FileMode, SortMode

from reconciler.errors import DenvError


class GitFailure(DenvError):
    """What libgit2 refused (a checkout over local changes, a fetch, a push); the message is
    libgit2's own."""


class CredentialsRefused(GitFailure):
    """The git server refused the token (or there is none)."""


class BlobTooLarge(DenvError):
    """A file larger than its reader takes: refused from git's object header, unread."""


# The most bytes of one file denv reads from git (imported results, JSON Lines, are the largest).
MAX_BLOB_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Blob:
    id: str
    data: bytes
    link: bool = False  # a symbolic link's target, not a file


@dataclass(frozen=True)
class BlobStat:
    size: int  # bytes, from the object's header: the data is not read
    link: bool


@dataclass(frozen=True)
class Author:
    name: str
    email: str


@dataclass(frozen=True)
class CommitInfo:
    id: str
    author: Author
    message: str


class Snapshot:
    """One commit's files, read from its tree (no work tree involved)."""

    def __init__(self, commit: pygit2.Commit, repo: pygit2.Repository) -> None:
        self._commit = commit
        self._repo = repo
        self.id = str(commit.id)
        self.tree_id = str(commit.tree.id)

    @property
    def message(self) -> str:
        return str(self._commit.message)

    @property
    def parent(self) -> Snapshot | None:
        """The first parent; None for a root commit."""
        parents = self._commit.parents
        return Snapshot(parents[0], self._repo) if parents else None

    def _entry(self, path: str) -> pygit2.Object | None:
        try:
            return self._commit.tree / path
        except (KeyError, ValueError):
            return None

    def stat(self, path: str) -> BlobStat | None:
        """The size of the file at `path` and whether it is a link, its data unread; None when
        there is none (or a folder is there)."""

        found = self._entry(path)
        if not isinstance(found, pygit2.Blob):
            return None
        _kind, size = self._repo.odb.read_header(found.id)
        return BlobStat(size, found.filemode == FileMode.LINK)

    def blob(self, path: str, max_bytes: int = MAX_BLOB_BYTES) -> Blob | None:
        """The file at `path`; None when there is none (or a folder is there). BlobTooLarge,
        unread, when it holds more than `max_bytes`."""

        found = self._entry(path)
        if not isinstance(found, pygit2.Blob):
            return None
        _kind, size = self._repo.odb.read_header(found.id)
        if size > max_bytes:
            raise BlobTooLarge(f"{path}: {size:,} bytes; denv reads at most {max_bytes:,} here")
        link = found.filemode == FileMode.LINK
        return Blob(str(found.id), bytes(found.data), link)

    def folders(self, path: str) -> list[str]:
        """Names of the folders directly in folder `path` (none when it is no folder)."""

        found = self._entry(path)
        if not isinstance(found, pygit2.Tree):
            return []
        return [e.name or "" for e in found if isinstance(e, pygit2.Tree)]

    def files(self, path: str) -> Iterator[str]:
        """Paths of the files under folder `path`, depth first in name order."""

        found = self._entry(path)
        if isinstance(found, pygit2.Tree):
            yield from _walk(found, path)


def _walk(tree: pygit2.Tree, prefix: str) -> Iterator[str]:
    for entry in sorted(tree, key=lambda e: e.name or ""):
        path = f"{prefix}/{entry.name}"
        if isinstance(entry, pygit2.Tree):
            yield from _walk(entry, path)
        elif isinstance(entry, pygit2.Blob):
            yield path


class GitRepo:
    """One repository (a work tree's or a bare one)."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self._repo = repo

    @classmethod
    def open(cls, path: Path, error: type[DenvError] = DenvError) -> GitRepo:
        """The repository at `path` (its work tree or git folder); `error` when there is none."""

        try:
            return cls(pygit2.Repository(str(path)))
        except pygit2.GitError as exc:
            raise error(f"{path}: not a git repository ({exc})") from exc

    @classmethod
    def discover(cls, path: Path) -> GitRepo:
        """The repository `path` is inside of; DenvError when it is inside none."""

        found = pygit2.discover_repository(str(path))
        if found is None:
            raise DenvError(f"{path}: not inside a git repository")
        return cls(pygit2.Repository(found))

    @classmethod
    def clone_bare(cls, url: str, path: Path) -> None:
        """A bare clone of `url` at `path`; GitFailure with libgit2's reason."""

        try:
            pygit2.clone_repository(url, str(path), bare=True)
        except pygit2.GitError as exc:
            raise GitFailure(str(exc)) from exc

    # -- reading ---------------------------------------------------------------------------

    @property
    def git_dir(self) -> Path:
        return Path(self._repo.path)

    @property
    def workdir(self) -> Path | None:
        workdir = self._repo.workdir
        return Path(workdir) if workdir else None

    def uncommitted(self) -> list[str]:
        """Paths where the work tree or index differs from HEAD (changed, staged, deleted or
        untracked; ignored files left out), sorted; [] for a bare repository."""
        if self._repo.is_bare:
            return []
        found = self._repo.status(untracked_files="all", ignored=False)
        return sorted(path for path, flags in found.items() if flags != pygit2.GIT_STATUS_CURRENT)

    def revparse(self, rev: str) -> Snapshot:
        """The commit `rev` names (an id, branch, tag or `HEAD~1`); GitFailure saying why not."""
        try:
            return Snapshot(self._repo.revparse_single(rev).peel(pygit2.Commit), self._repo)
        except (KeyError, ValueError, pygit2.GitError) as exc:
            raise GitFailure(str(exc)) from exc

    def commit(self, rev: str) -> Snapshot | None:
        """The commit `rev` names; None when none."""
        try:
            return self.revparse(rev)
        except GitFailure:
            return None

    def lookup(self, sha: str) -> Snapshot | None:
        """The commit with id `sha` (no names); None when it is not here or not a commit."""

        try:
            found = self._repo.get(sha)
        except (KeyError, ValueError):
            return None
        return Snapshot(found, self._repo) if isinstance(found, pygit2.Commit) else None

    def first_parents(self, sha: str, limit: int) -> Iterator[Snapshot]:
        """`sha` and its first parents, newest first, at most `limit` of them."""
        current = self.lookup(sha)
        for _ in range(limit):
            if current is None:
                return
            yield current
            current = current.parent

    def branch_tip(self, branch: str) -> str | None:
        """The commit `refs/heads/<branch>` points at; None when there is no such branch."""
        return self.ref_tip(f"refs/heads/{branch}")

    def ref_tip(self, ref: str) -> str | None:

        found = self._repo.references.get(ref)
        return None if found is None else str(found.peel(pygit2.Commit).id)

    def merge_base(self, one: str, other: str) -> str | None:
        found = self._repo.merge_base(one, other)
        return None if found is None else str(found)

    def descendant_of(self, sha: str, ancestor: str) -> bool:
        return bool(self._repo.descendant_of(sha, ancestor))

    def changed_paths(self, since: str | None, head: str) -> list[str]:
        """Paths that differ between commits `since` and `head`; every path of `head` when
        `since` is None."""

        tip = self._repo[head].peel(pygit2.Commit)
        if since is None:
            diff = tip.tree.diff_to_tree(swap=True)
        else:
            diff = self._repo.diff(self._repo[since].peel(pygit2.Commit), tip)
        return sorted({delta.new_file.path for delta in diff.deltas})

    def commits_between(self, tip: str, hide: str) -> list[CommitInfo]:
        """Commits reachable from `tip` but not from `hide`, in topological order."""
        walker = self._repo.walk(tip, SortMode.TOPOLOGICAL)
        walker.hide(hide)
        return [
            CommitInfo(str(c.id), Author(c.author.name, c.author.email), str(c.message))
            for c in walker
        ]

    def config(self, key: str) -> str | None:
        try:
            return str(self._repo.config[key])
        except KeyError:
            return None

    def default_author(self) -> Author | None:
        """The person git config names (user.name, user.email); None when it names none."""

        try:
            found = self._repo.default_signature
        except (KeyError, pygit2.GitError):
            return None
        return Author(found.name, found.email)

    # -- writing ---------------------------------------------------------------------------

    def tree_with(self, base: str, files: dict[str, bytes]) -> str:
        """The id of commit `base`'s tree with `files` (new or changed) written in."""

        index = pygit2.Index()
        index.read_tree(self._repo[base].peel(pygit2.Commit).tree)
        for path, data in sorted(files.items()):
            index.add(pygit2.IndexEntry(path, self._repo.create_blob(data), FileMode.BLOB))
        return str(index.write_tree(self._repo))

    def merged_tree(self, base: str, head: str) -> str | list[str]:
        """The tree of merging `head` into `base`, or the paths in conflict."""
        index = self._repo.merge_commits(base, head)
        if index.conflicts is not None:
            return sorted({e.path for trio in index.conflicts for e in trio if e is not None})
        return str(index.write_tree(self._repo))

    def create_commit(
        self,
        tree: str,
        parents: list[str],
        author: Author,
        message: str,
        ref: str | None = None,
    ) -> str:
        """A new commit (author and committer alike); `ref` (e.g. `HEAD`) moves to it."""

        signature = pygit2.Signature(author.name, author.email)
        found = self._repo.create_commit(
            ref, signature, signature, message, pygit2.Oid(hex=tree), parents
        )
        return str(found)

    def set_branch(self, branch: str, sha: str) -> None:
        """Point `refs/heads/<branch>` at `sha`, made or moved."""
        self._repo.references.create(f"refs/heads/{branch}", sha, force=True)

    def checked_out_branch(self) -> str | None:
        """The branch (`refs/heads/…`) the work tree has checked out; None when the repository
        is bare, its HEAD detached or unborn."""
        repo = self._repo
        if repo.is_bare or repo.head_is_unborn or repo.head_is_detached:
            return None
        return str(repo.references["HEAD"].target)

    def move_ref(self, ref: str, sha: str, log: str) -> None:
        """Move the existing `ref` to `sha`, with `log` in its reflog."""
        self._repo.references[ref].set_target(sha, log)

    def checkout(self, sha: str) -> None:
        """Bring the work tree and index to commit `sha`, never over local changes
        (GitFailure then)."""

        try:
            self._repo.checkout_tree(  # type: ignore[no-untyped-call]
                self._repo[sha], strategy=CheckoutStrategy.SAFE
            )
        except pygit2.GitError as exc:
            raise GitFailure(str(exc)) from exc

    def stage_files(self, files: dict[str, bytes]) -> None:
        """Write `files` into the work tree and add them to the index."""
        workdir = self.workdir
        assert workdir is not None, "a bare repository has no work tree"
        for path, data in files.items():
            (workdir / path).parent.mkdir(parents=True, exist_ok=True)
            (workdir / path).write_bytes(data)
            self._repo.index.add(path)
        self._repo.index.write()

    # -- remotes ---------------------------------------------------------------------------

    def fetch_origin(self) -> None:
        """Fetch the `origin` remote (a clone's); GitFailure with libgit2's reason."""

        try:
            self._repo.remotes["origin"].fetch()
        except (pygit2.GitError, KeyError) as exc:
            raise GitFailure(str(exc)) from exc

    def remote_heads(self, url: str, token: Callable[[], str | None]) -> dict[str, str]:
        """Branch name -> tip of every branch at `url`."""

        remote = self._repo.remotes.create_anonymous(url)
        try:
            heads = remote.list_heads(callbacks=_Callbacks(token))
        except pygit2.GitError as exc:
            raise GitFailure(str(exc)) from exc
        prefix = "refs/heads/"
        names = {h.name or "": str(h.oid) for h in heads}
        return {n[len(prefix) :]: tip for n, tip in names.items() if n.startswith(prefix)}

    def fetch(self, url: str, refspecs: list[str], token: Callable[[], str | None]) -> None:

        remote = self._repo.remotes.create_anonymous(url)
        try:
            remote.fetch(refspecs, callbacks=_Callbacks(token))
        except pygit2.GitError as exc:
            raise GitFailure(str(exc)) from exc

    def push(
        self, url: str, local_ref: str, sha: str, branch: str, token: Callable[[], str | None]
    ) -> list[str]:
        """Point `local_ref` at `sha` and push it to `branch` at `url`, never forced: the
        reasons the server rejected it (empty: pushed); GitFailure when libgit2 refused."""

        self._repo.references.create(local_ref, sha, force=True)
        callbacks = _Callbacks(token)
        remote = self._repo.remotes.create_anonymous(url)
        try:
            remote.push([f"{local_ref}:refs/heads/{branch}"], callbacks=callbacks)
        except pygit2.GitError as exc:
            raise GitFailure(str(exc)) from exc
        return list(callbacks.rejected.values())


class _Callbacks(pygit2.RemoteCallbacks):
    """The token as the password of `x-access-token` (in memory only), given once; the
    server's reasons for rejecting references."""

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
            raise CredentialsRefused("the git server refused the bot's credentials")
        return pygit2.UserPass("x-access-token", token)

    def push_update_reference(self, refname: str, message: str | None) -> None:
        if message:
            self.rejected[refname] = message
