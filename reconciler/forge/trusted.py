"""Adapter: the one trusted ref of a repository — its default branch, as the forge says, and
the commit that branch points at in the repository the caller has checked out. Every path a
pull request triggers (plan, bench, `/denv` commands, approvals and the merge gate) reads
fleets, policies, parity suites and allowed signers from this commit, never from the pull
request nor from the base branch its author picked; and only a pull request into the default
branch (or a branch the trusted policy names) may start trials on hosts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reconciler.adapters.git import GitRepo
from reconciler.errors import DenvError
from reconciler.forge.models import PullRequest
from reconciler.forge.prdiff import branch_tip
from reconciler.forge.protocol import Forge


@dataclass(frozen=True)
class TrustedRef:
    branch: str  # the repository's default branch
    commit: str  # its tip here: the branch, else origin's copy of it (a CI checkout)

    @property
    def label(self) -> str:
        return f"{self.branch} @ {self.commit[:12]}"


def trusted_ref(forge: Forge, root: Path) -> TrustedRef:
    """The default branch and its tip in the repository at `root`. DenvError when the branch
    is not here (a shallow CI checkout): nothing is then read from anywhere else."""
    branch = forge.default_branch()
    tip = branch_tip(GitRepo.discover(root), branch)
    if tip is None:
        raise DenvError(
            f"{root}: no branch '{branch}' (nor origin/{branch}): fleets and policies are read "
            f"from the default branch, '{branch}'; fetch it first (git fetch origin {branch})"
        )
    return TrustedRef(branch, tip)


def trial_refusal(
    pr: PullRequest, trusted: TrustedRef, allowed_bases: Sequence[str] = ()
) -> str | None:
    """Why pull request `pr` may not start trials on hosts, None when it may: its base must be
    the default branch or one of `allowed_bases` (branches the trusted policy names). Anyone
    who can push a branch can open a pull request into it, so another base proves nothing."""
    if pr.base_branch == trusted.branch or pr.base_branch in allowed_bases:
        return None
    return (
        f"This pull request's base, `{pr.base_branch}`, is not the default branch "
        f"`{trusted.branch}`: it is planned against `{trusted.branch}`'s fleets and policies, "
        f"but nothing runs on hosts for it. Retarget it to `{trusted.branch}` to bench it."
    )
