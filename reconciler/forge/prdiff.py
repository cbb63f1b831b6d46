"""Adapter: where a pull request's head left its base branch (the merge base GitHub diffs
against), read with pygit2 from the repository the caller has checked out."""

from __future__ import annotations

from pathlib import Path

import pygit2

from reconciler.errors import DenvError


def _commit(repo: pygit2.Repository, rev: str) -> pygit2.Commit | None:
    try:
        return repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return None


def _repository(root: Path) -> pygit2.Repository:
    found = pygit2.discover_repository(str(root))
    if found is None:
        raise DenvError(f"{root}: not inside a git repository")
    return pygit2.Repository(found)


def _branch_tip(repo: pygit2.Repository, base: str) -> pygit2.Commit | None:
    return _commit(repo, f"refs/heads/{base}") or _commit(repo, f"refs/remotes/origin/{base}")


def base_tip(root: Path, base: str) -> str:
    """The commit the base branch points at (the branch, else origin's copy of it): where a
    pull request's fleets and policies are read from. DenvError when it is not here."""
    tip = _branch_tip(_repository(root), base)
    if tip is None:
        raise DenvError(
            f"{root}: no branch '{base}' (nor origin/{base}): a pull request's fleets and "
            f"policies are read from its base branch; fetch it first (git fetch origin {base})"
        )
    return str(tip.id)


def fork_point(root: Path, base: str, head: str) -> str | None:
    """The commit where `head` left `base` (the branch, else origin's copy of it, as a CI
    checkout has it); None when no base branch is found or they share no history."""
    repo = _repository(root)
    tip = _commit(repo, head)
    if tip is None:
        raise DenvError(f"{root}: no commit {head[:12]}")
    onto = _branch_tip(repo, base)
    if onto is None:
        return None
    fork = repo.merge_base(onto.id, tip.id)
    return None if fork is None else str(fork)
