"""Adapter: where a pull request's head left its base branch (the merge base GitHub diffs
against), read with the git adapter from the repository the caller has checked out."""

from __future__ import annotations

from pathlib import Path

from reconciler.adapters.git import GitRepo
from reconciler.errors import DenvError


def branch_tip(repo: GitRepo, base: str) -> str | None:
    """A branch's tip: the branch, else origin's copy of it (as a CI checkout has it). Where
    fleets and policies are read from is forge/trusted.py's to say, never a caller's."""
    found = repo.commit(f"refs/heads/{base}") or repo.commit(f"refs/remotes/origin/{base}")
    return None if found is None else found.id


def fork_point(root: Path, base: str, head: str) -> str | None:
    """The commit where `head` left `base` (the branch, else origin's copy of it, as a CI
    checkout has it); None when no base branch is found or they share no history."""
    repo = GitRepo.discover(root)
    tip = repo.commit(head)
    if tip is None:
        raise DenvError(f"{root}: no commit {head[:12]}")
    onto = branch_tip(repo, base)
    return None if onto is None else repo.merge_base(onto, tip.id)
