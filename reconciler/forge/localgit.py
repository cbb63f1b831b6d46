"""Adapter: the two git operations around a pull request that are not the forge's own — which
files a head changes against its base, and a commit of new files straight onto the branch a
work tree has checked out (for repositories without review) — with pygit2."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pygit2
from pygit2.enums import FileMode

from reconciler.errors import DenvError, ForgeError
from reconciler.forge.protocol import BotIdentity


def _open(root: Path) -> pygit2.Repository:
    found = pygit2.discover_repository(str(root))
    if found is None:
        raise DenvError(f"{root}: not inside a git repository")
    return pygit2.Repository(found)


def _commit(repo: pygit2.Repository, rev: str) -> pygit2.Commit | None:
    try:
        return repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return None


def has_commit(root: Path, sha: str) -> bool:
    return _commit(_open(root), sha) is not None


def changed_paths(root: Path, base: str, head: str) -> list[str]:
    """Paths the head changes since it left `base` (the branch, else origin's copy of it), as
    GitHub's "files changed" shows them; every path of the head when no base is found."""
    repo = _open(root)
    tip = _commit(repo, head)
    if tip is None:
        raise DenvError(f"{root}: no commit {head[:12]}")
    onto = _commit(repo, f"refs/heads/{base}") or _commit(repo, f"refs/remotes/origin/{base}")
    fork = repo.merge_base(onto.id, tip.id) if onto is not None else None
    if fork is None:
        diff = tip.tree.diff_to_tree(swap=True)
    else:
        diff = repo.diff(repo[fork].peel(pygit2.Commit), tip)
    return sorted({delta.new_file.path for delta in diff.deltas})


def commit_files(root: Path, files: dict[str, bytes], message: str, fallback: BotIdentity) -> str:
    """Commit `files` (new or changed) onto the checked-out branch as the person in git config
    (else `fallback`), and write them into the work tree and index. Nothing else staged or
    edited is committed."""
    repo = _open(root)
    if repo.is_bare or repo.head_is_unborn or repo.head_is_detached:
        raise ForgeError(f"{root}: --commit needs a work tree with a branch checked out")
    for path in files:
        parts = PurePosixPath(path).parts
        if path.startswith("/") or ".." in parts or not parts:
            raise ForgeError(f"'{path}' is not a plain path inside the repository")
    parent = repo.head.peel(pygit2.Commit)
    index = pygit2.Index()
    index.read_tree(parent.tree)
    for path, data in sorted(files.items()):
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), FileMode.BLOB))
    tree = index.write_tree(repo)
    try:
        signature = repo.default_signature
    except (KeyError, pygit2.GitError):
        signature = pygit2.Signature(fallback.name, fallback.email)
    commit = repo.create_commit("HEAD", signature, signature, message, tree, [parent.id])
    workdir = Path(repo.workdir)
    for path, data in files.items():
        (workdir / path).parent.mkdir(parents=True, exist_ok=True)
        (workdir / path).write_bytes(data)
        repo.index.add(path)
    repo.index.write()
    return str(commit)
