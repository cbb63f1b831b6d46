"""Adapter: the files of a denv repository, from a work tree or from any git commit.

A commit is read from its tree's blobs (the git adapter, reconciler/adapters/git.py) without
a checkout, so the reconciler can load each stage at its own pinned revision side by side.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from reconciler.errors import DenvError
from reconciler.spec.bounds import max_bytes, size_refusal
from reconciler.spec.reading import UnreadableFile, open_measured, read_bounded

if TYPE_CHECKING:  # imported where a commit is read: a work tree needs no git (start-up)
    from reconciler.adapters.git import Snapshot

# Where denv files live; everything else in the repository is not denv's business.
DENV_DIRS = ("catalog", "recipes", "fleets", "releases", "policies", "results")


class FileSource(Protocol):
    label: str

    def files(self) -> Iterator[str]:
        """Repository-relative POSIX paths of the files under DENV_DIRS (and of the links
        there that the source refuses, for `stat` to say so)."""
        ...

    def stat(self, path: str) -> int:
        """The file's size in bytes, its data unread; UnreadableFile for a path the source
        never reads (a link that leaves the repository)."""
        ...

    def read(self, path: str) -> bytes:
        """The file's bytes, measured first and never read past `bounds.max_bytes(path)`;
        UnreadableFile when it is larger, or when `stat` refuses it."""
        ...


LEAVES = "a symbolic link that leaves the repository: not read"


class WorkTree:
    """The files of a folder. Links are followed only while they stay inside it: a file or a
    folder whose link leaves the repository is listed, refused and never opened or walked."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.real = root.resolve()
        self.label = str(root)

    def _inside(self, path: Path) -> bool:
        return path.resolve().is_relative_to(self.real)

    def files(self) -> Iterator[str]:
        for top in DENV_DIRS:
            base = self.root / top
            if base.is_symlink() and not self._inside(base):
                yield top  # refused by `stat`; nothing under it is listed
            elif base.is_dir():
                for path in sorted(base.rglob("*")):  # rglob walks no linked folder
                    leaves = path.is_symlink() and not self._inside(path)
                    if leaves or path.is_file():
                        yield path.relative_to(self.root).as_posix()

    def _file(self, path: str) -> Path:
        file = self.root / path
        if not self._inside(file):
            # Never open it: its target's text would reach error messages and comments.
            raise UnreadableFile(LEAVES)
        return file

    def stat(self, path: str) -> int:
        descriptor, size = open_measured(self._file(path))
        os.close(descriptor)
        return size

    def read(self, path: str) -> bytes:
        return read_bounded(self._file(path), max_bytes(path))


class GitCommit:
    def __init__(self, repo_path: Path, rev: str) -> None:
        from reconciler.adapters.git import GitFailure, GitRepo

        try:
            commit = GitRepo.open(repo_path).revparse(rev)
        except GitFailure as exc:
            raise DenvError(f"{repo_path}: no commit '{rev}' ({exc})") from exc
        self.snapshot: Snapshot = commit
        self.commit_id = commit.id
        self.label = f"{repo_path}@{self.commit_id[:12]}"

    def files(self) -> Iterator[str]:
        for top in DENV_DIRS:
            yield from self.snapshot.files(top)

    def stat(self, path: str) -> int:
        found = self.snapshot.stat(path)
        assert found is not None, f"{path}: not a file of {self.label}"
        if found.link:
            raise UnreadableFile("a symbolic link: denv files must be regular files; not read")
        return found.size

    def read(self, path: str) -> bytes:
        size = self.stat(path)  # from git's object header: a large blob is never inflated
        refusal = size_refusal(path, size)
        if refusal is not None:
            raise UnreadableFile(refusal)
        blob = self.snapshot.blob(path, max_bytes(path))
        assert blob is not None, f"{path}: not a file of {self.label}"
        return blob.data


def find_root(start: Path) -> Path:
    """The nearest folder at or above `start` that holds denv files."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if any((folder / top).is_dir() for top in DENV_DIRS[:4]):
            return folder
    raise DenvError(
        f"{start}: no denv repository here or above (no catalog/, recipes/, "
        "fleets/ or releases/ folder)"
    )


# What a pull request may never decide: where denv connects, what it runs beside engines,
# which secret it sends, who approves, and the parity suites that judge it. These paths are
# read from the repository's default branch (the one trusted ref, forge/trusted.py) on every
# path a pull request triggers; a pull request's version of a parity suite may only run beside
# the default branch's, reported and never gating (pr/suites.py).
TRUSTED_PREFIXES = ("fleets/", "policies/")


def is_trusted_path(path: str) -> bool:
    """Whether `path` is one a pull request cannot change for the bot (read from the default
    branch)."""
    return path.startswith(TRUSTED_PREFIXES)


class TrustedOverlay:
    """A pull request's files as the bot acts on them: the head's recipes, releases and
    catalog, with fleets and policies (parity suites included) from the trusted commit."""

    def __init__(self, head: FileSource, trusted: FileSource) -> None:
        self.head = head
        self.trusted = trusted
        self.label = f"{head.label} (fleets and policies from {trusted.label})"

    def files(self) -> Iterator[str]:
        yield from sorted(
            [p for p in self.head.files() if not is_trusted_path(p)]
            + [p for p in self.trusted.files() if is_trusted_path(p)]
        )

    def stat(self, path: str) -> int:
        return (self.trusted if is_trusted_path(path) else self.head).stat(path)

    def read(self, path: str) -> bytes:
        return (self.trusted if is_trusted_path(path) else self.head).read(path)
