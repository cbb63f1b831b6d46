"""Adapter: the files of a denv repository, from a work tree or from any git commit.

A commit is read from its tree's blobs (the git adapter, reconciler/adapters/git.py) without
a checkout, so the reconciler can load each stage at its own pinned revision side by side.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from reconciler.errors import DenvError

if TYPE_CHECKING:  # imported where a commit is read: a work tree needs no git (start-up)
    from reconciler.adapters.git import Snapshot

# Where denv files live; everything else in the repository is not denv's business.
DENV_DIRS = ("catalog", "recipes", "fleets", "releases", "policies", "results")


class FileSource(Protocol):
    label: str

    def files(self) -> Iterator[str]:
        """Repository-relative POSIX paths of the files under DENV_DIRS."""
        ...

    def read(self, path: str) -> bytes: ...


class UnreadableFile(DenvError):
    """A path the loader refuses to read (the message says why); it becomes a problem."""


class WorkTree:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.label = str(root)

    def files(self) -> Iterator[str]:
        for top in DENV_DIRS:
            base = self.root / top
            if base.is_dir():
                for path in sorted(base.rglob("*")):
                    if path.is_file():
                        yield path.relative_to(self.root).as_posix()

    def read(self, path: str) -> bytes:
        file = self.root / path
        if file.is_symlink() and not file.resolve().is_relative_to(self.root.resolve()):
            # Never read it: its target's text would reach error messages and comments.
            raise UnreadableFile("a symbolic link that leaves the repository: not read")
        return file.read_bytes()


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

    def read(self, path: str) -> bytes:
        blob = self.snapshot.blob(path)
        assert blob is not None, f"{path}: not a file of {self.label}"
        if blob.link:
            raise UnreadableFile("a symbolic link: denv files must be regular files; not read")
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

    def read(self, path: str) -> bytes:
        return (self.trusted if is_trusted_path(path) else self.head).read(path)
