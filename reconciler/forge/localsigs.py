"""Adapter: who signed a local pull request — its opening and its approvals — by the allowed
signers of the repository's default branch (the one trusted ref: never the pull request's
base, which its author may have made), with `ssh-keygen -Y verify` (sshsig.py).

The opening names the author: a pull request whose opening is unsigned, or not signed by a key
the allowed signers list for its author, cannot merge. An approval counts only signed by a
key they list for its approver, and never when that key is the one that opened the pull
request, whatever name the approval claims: one key is one person. Pull requests the bot
opens carry no signature (the bot holds no key); the bot never approves.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.adapters.git import GitRepo
from reconciler.errors import ForgeError, NotFound
from reconciler.forge import sshsig
from reconciler.forge.commands import (
    ALLOWED_SIGNERS,
    APPROVAL_NAMESPACE,
    OPENING_NAMESPACE,
    allowed_signers_problems,
    approval_message,
    opening_message,
)
from reconciler.forge.localstore import LocalPr
from reconciler.forge.models import ReviewState


@dataclass(frozen=True)
class Signers:
    """The default branch's allowed signers file (None: it has none) and that branch."""

    text: str | None
    branch: str


def read_signers(repo: GitRepo, branch: str) -> Signers:
    """The allowed signers on `branch` (the default branch); an invalid line stops."""
    tip = repo.branch_tip(branch)
    if tip is None:
        raise NotFound(f"no branch '{branch}' in {repo.git_dir.parent}")
    blob = repo.revparse(tip).blob(ALLOWED_SIGNERS)
    if blob is None:
        return Signers(None, branch)
    text = blob.data.decode(errors="replace")
    for line, problem in allowed_signers_problems(text)[:1]:
        raise ForgeError(f"{ALLOWED_SIGNERS}:{line} (on {branch}): {problem}")
    return Signers(text, branch)


def opening_problem(signers: Signers, record: LocalPr, bot: str) -> str | None:
    """Why `record`'s opening does not name its author; None when it does (or the bot opened
    it: the bot holds no key, and never approves)."""
    if record.opening is None:
        if record.author == bot:
            return None
        return f"its opening is not signed by its author {record.author} (denv pr open --key)"
    if signers.text is None:
        return f"{signers.branch} has no {ALLOWED_SIGNERS} to check its opening by"
    message = opening_message(
        record.number, record.head_branch, record.base_branch, record.opened_head, record.author
    )
    said = sshsig.verify(signers.text, record.author, OPENING_NAMESPACE, message, record.opening)
    if said is not None:
        return (
            f"its opening is not signed by {record.author}'s key by {ALLOWED_SIGNERS} "
            f"on {signers.branch}"
        )
    return None


def approval_problem(signers: Signers, record: LocalPr, head: str, user: str) -> str | None:
    """Why `user`'s approval of `head` does not count as theirs; None when it does."""
    if signers.text is None:
        return f"{signers.branch} has no {ALLOWED_SIGNERS} to check its signature by"
    approval = next(
        r
        for r in reversed(record.reviews)
        if (r.user, r.state, r.commit) == (user, ReviewState.APPROVED, head)
    )
    if approval.signature is None:
        return "unsigned (denv pr approve --key)"
    message = approval_message(record.number, record.base_branch, head, user)
    said = sshsig.verify(signers.text, user, APPROVAL_NAMESPACE, message, approval.signature)
    if said is not None:
        return f"its signature is not {user}'s by {ALLOWED_SIGNERS} on {signers.branch}"
    if record.opening is not None and _same_key(approval.signature, record.opening):
        return "signed by the key that opened the pull request: its author's"
    return None


def _same_key(one: str, other: str) -> bool:
    key = sshsig.signer_key(one)
    return key is not None and key == sshsig.signer_key(other)
