"""Adapter: the files of a denv repository, from a work tree or from any git commit.

A commit is read from its tree's blobs (pygit2), without a checkout, so the reconciler can
load each stage at its own pinned revision side by side.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from reconciler.errors import DenvError

if TYPE_CHECKING:  # imported where a commit is read: a work tree needs no git (start-up)
    import pygit2

# Where denv files live; everything else in the repository is not denv's business.
DENV_DIRS = ("catalog", "recipes", "fleets", "releases", "policies", "results")


class FileSource(Protocol):
    label: str

    def files(self) -> Iterator[str]:
        """Repository-relative POSIX paths of the files under DENV_DIRS."""
        ...

    def read(self, path: str) -> bytes: ...


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
        return (self.root / path).read_bytes()


class GitCommit:
    def __init__(self, repo_path: Path, rev: str) -> None:
        import pygit2

        try:
            self.repo = pygit2.Repository(str(repo_path))
        except pygit2.GitError as exc:
            raise DenvError(f"{repo_path}: not a git repository ({exc})") from exc
        try:
            commit = self.repo.revparse_single(rev).peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError) as exc:
            raise DenvError(f"{repo_path}: no commit '{rev}' ({exc})") from exc
        self.commit_id = str(commit.id)
        self.tree = commit.tree
        self.label = f"{repo_path}@{self.commit_id[:12]}"

    def files(self) -> Iterator[str]:
        import pygit2

        for top in DENV_DIRS:
            if top in self.tree:
                obj = self.tree[top]
                if isinstance(obj, pygit2.Tree):
                    yield from self._walk(obj, top)

    def _walk(self, tree: pygit2.Tree, prefix: str) -> Iterator[str]:
        import pygit2

        for entry in sorted(tree, key=lambda e: e.name or ""):
            path = f"{prefix}/{entry.name}"
            if isinstance(entry, pygit2.Tree):
                yield from self._walk(entry, path)
            elif isinstance(entry, pygit2.Blob):
                yield path

    def read(self, path: str) -> bytes:
        import pygit2

        blob = self.tree[path]
        assert isinstance(blob, pygit2.Blob)
        return bytes(blob.data)


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
