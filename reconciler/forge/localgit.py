"""Adapter: the two git operations around a pull request that are not the forge's own — which
files a head changes against its base, and a commit of new files straight onto the branch a
work tree has checked out (for repositories without review) — with the git adapter."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from reconciler.adapters.git import Author, GitRepo
from reconciler.errors import DenvError, ForgeError
from reconciler.forge.prdiff import branch_tip
from reconciler.forge.protocol import BotIdentity


def has_commit(root: Path, sha: str) -> bool:
    return GitRepo.discover(root).commit(sha) is not None


def changed_paths(root: Path, base: str, head: str) -> list[str]:
    """Paths the head changes since it left `base` (the branch, else origin's copy of it), as
    GitHub's "files changed" shows them; every path of the head when no base is found."""
    repo = GitRepo.discover(root)
    tip = repo.commit(head)
    if tip is None:
        raise DenvError(f"{root}: no commit {head[:12]}")
    onto = branch_tip(repo, base)
    fork = repo.merge_base(onto, tip.id) if onto is not None else None
    return repo.changed_paths(fork, tip.id)


def commit_files(root: Path, files: dict[str, bytes], message: str, fallback: BotIdentity) -> str:
    """Commit `files` (new or changed) onto the checked-out branch as the person in git config
    (else `fallback`), and write them into the work tree and index. Nothing else staged or
    edited is committed."""
    repo = GitRepo.discover(root)
    if repo.checked_out_branch() is None:
        raise ForgeError(f"{root}: --commit needs a work tree with a branch checked out")
    for path in files:
        parts = PurePosixPath(path).parts
        if path.startswith("/") or ".." in parts or not parts:
            raise ForgeError(f"'{path}' is not a plain path inside the repository")
    parent = repo.revparse("HEAD").id
    tree = repo.tree_with(parent, files)
    author = repo.default_author() or Author(fallback.name, fallback.email)
    commit = repo.create_commit(tree, [parent], author, message, ref="HEAD")
    repo.stage_files(files)
    return commit
