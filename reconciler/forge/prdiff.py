"""Adapter: where a pull request's head left its base branch (the merge base GitHub diffs
against), read with the git adapter from the repository the caller has checked out."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.git import GitRepo
from reconciler.errors import DenvError


def branch_tip(repo: GitRepo, base: str) -> str | None:
    """The base branch's tip: the branch, else origin's copy of it (as a CI checkout has it)."""
    found = repo.commit(f"refs/heads/{base}") or repo.commit(f"refs/remotes/origin/{base}")
    return None if found is None else found.id


def base_tip(root: Path, base: str) -> str:
    """The commit the base branch points at (the branch, else origin's copy of it): where a
    pull request's fleets and policies are read from. DenvError when it is not here."""
    tip = branch_tip(GitRepo.discover(root), base)
    if tip is None:
        raise DenvError(
            f"{root}: no branch '{base}' (nor origin/{base}): a pull request's fleets and "
            f"policies are read from its base branch; fetch it first (git fetch origin {base})"
        )
    return tip


def fork_point(root: Path, base: str, head: str) -> str | None:
    """The commit where `head` left `base` (the branch, else origin's copy of it, as a CI
    checkout has it); None when no base branch is found or they share no history."""
    repo = GitRepo.discover(root)
    tip = repo.commit(head)
    if tip is None:
        raise DenvError(f"{root}: no commit {head[:12]}")
    onto = branch_tip(repo, base)
    return None if onto is None else repo.merge_base(onto, tip.id)
