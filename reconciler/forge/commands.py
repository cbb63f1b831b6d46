"""Pure logic: comment commands (`/denv NAME …`), approvals and the merge gate.

On the local forge a pull request's opening is signed with its author's SSH key
(`ssh-keygen -Y sign`, namespace `denv-pr-open`) over `opening_message`, and an approval with
the reviewer's (namespace `denv-approval`) over `approval_message`; both are checked against the
allowed signers (OpenSSH's format, as git's `gpg.ssh.allowedSignersFile`) in the default
branch's `policies/allowed_signers`, whose lines `allowed_signers_problems` checks first.

A command is the first line of a comment: `/denv`, a name, and its words. Which names are
commands is pr/commands.py's `COMMANDS` (a name it lacks is refused there, and runs nothing);
here a name is only read. Who may give one, and whose approval counts, is decided by the forge
(write permission, the approvers policy); the rules are here.
A command runs on the commit it was given on: the one it names in full (`/denv bench` and the
commit's 40 hex digits), else the head when it was commented, where the forge records that
(the local forge does, GitHub does not); when the head has moved since, it is refused
(docs/github.md). A prefix is refused, not resolved: a 7-digit one is forged by brute force
in under a minute, and the command would run on the forged commit.
"""

from __future__ import annotations

import base64
import binascii
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from reconciler.forge.models import (
    Approvals,
    CheckRun,
    Comment,
    CommentCommand,
    Ignored,
    Review,
    ReviewState,
)

PREFIX = "/denv"
USAGE = "a denv command is `/denv NAME` (from users with write permission; docs/github.md)."
# a command's name, shown as written in the bot's commands comment: nothing markdown reads
NAME = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
# what reads as a commit: a full one, or a prefix that is refused for being one
_NAMED_SHA = re.compile(r"^[0-9a-f]{4,40}$")


@dataclass(frozen=True)
class Command:
    name: str
    args: list[str]


@dataclass(frozen=True)
class Reply:
    """A `/denv …` that is not a command: tell the user what is."""

    text: str


@dataclass(frozen=True)
class Ignore:
    pass


def parse_command(body: str) -> Command | Reply | Ignore:
    lines = body.strip().splitlines()
    if not lines:
        return Ignore()
    first = lines[0].strip()
    if first != PREFIX and not first.startswith(PREFIX + " "):
        return Ignore()
    try:
        words = shlex.split(first)[1:]
    except ValueError:
        return Reply(f"cannot read `{first}`: {USAGE}")
    if not words:
        return Reply(USAGE)
    if not NAME.match(words[0]):
        return Reply(f"no command is named like `{words[0]}`: {USAGE}")
    return Command(words[0], words[1:])


def comment_commands(
    comments: Iterable[Comment], allowed: Callable[[str], bool]
) -> list[CommentCommand]:
    """`/denv` commands in `comments`, from the authors `allowed` says may give them."""
    found = []
    for comment in comments:
        parsed = parse_command(comment.body)
        if isinstance(parsed, Command) and allowed(comment.author):
            found.append(
                CommentCommand(
                    comment_id=comment.id,
                    user=comment.author,
                    command=parsed.name,
                    args=parsed.args,
                    at=comment.at,
                    head_sha=named_commit(parsed.args) or comment.head_sha,
                )
            )
    return found


def named_commit(args: Sequence[str]) -> str | None:
    """The commit a command names, if it names one: in full (40 hex digits), or a prefix
    of 4 to 39 that `head_moved` refuses."""
    return next((a.lower() for a in args if _NAMED_SHA.match(a.lower())), None)


def head_moved(command: CommentCommand, head_sha: str) -> str | None:
    """Why `command` may not run on the pull request's head `head_sha`; None when it may.
    It runs only on the very commit it was given on, named in full."""
    given = command.head_sha
    if given is None:
        return (
            f"refused: the comment names no commit, and the head it was given on is not known; "
            f"comment `/denv {command.command} {head_sha}` to run on the head"
        )
    if not FULL_SHA.match(given):
        return (
            f"refused: `{given}` is a prefix, and a prefix can be forged; name the commit in "
            f"full (40 hex digits): `/denv {command.command} {head_sha}` to run on the head"
        )
    if head_sha != given:
        return (
            f"refused: commented on {given[:12]}, but the head is now {head_sha[:12]}; "
            "comment again to run on the new head"
        )
    return None


def approver_rule(approvers: Sequence[str]) -> tuple[set[str], set[str]]:
    """The approvers policy as (users, org/team slugs); both empty: write permission decides."""
    users = {a.lower() for a in approvers if "/" not in a}
    teams = {a.lower() for a in approvers if "/" in a}
    return users, teams


@dataclass(frozen=True)
class Candidates:
    """Reviewers whose latest word is an approval of the head commit, not yet checked for
    permission, and those left out already, with why."""

    users: list[str]
    ignored: list[Ignored]


def approval_candidates(reviews: Sequence[Review], head_sha: str, author: str) -> Candidates:
    latest: dict[str, Review] = {}
    for review in sorted(reviews, key=lambda r: r.at):
        # a comment neither grants nor withdraws an approval
        if review.state != ReviewState.COMMENTED:
            latest[review.user] = review
    users: list[str] = []
    ignored: list[Ignored] = []
    for user, review in sorted(latest.items()):
        if review.state != ReviewState.APPROVED:
            continue  # changes requested or dismissed after approving: nothing to count
        if user.lower() == author.lower():
            ignored.append(Ignored(user=user, reason="author of the pull request"))
        elif review.commit != head_sha:
            ignored.append(
                Ignored(user=user, reason=f"approved {review.commit[:12]}, not the head")
            )
        else:
            users.append(user)
    return Candidates(users=users, ignored=ignored)


def merge_blockers(approvals: Approvals, required: int, checks: Sequence[CheckRun]) -> list[str]:
    """Why a pull request may not merge yet; empty when it may. A pull request whose author
    is not known (approvals.opening) never may: nobody can tell its author's approval."""
    blockers = [
        f"check '{c.name}' is {c.conclusion}: {c.title}" for c in checks if c.conclusion.blocks
    ]
    if approvals.opening is not None:
        blockers.append(approvals.opening)
    if approvals.count < required:
        who = f" ({', '.join(approvals.counted)})" if approvals.counted else ""
        blockers.append(f"{approvals.count} of {required} approvals of the head{who}")
    return blockers


ALLOWED_SIGNERS = "policies/allowed_signers"
APPROVAL_NAMESPACE = "denv-approval"
OPENING_NAMESPACE = "denv-pr-open"
KEY_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
    }
)
_SIGNER_LINE = "expected `PRINCIPALS [OPTIONS] KEY-TYPE BASE64-KEY [COMMENT]`"


def approval_message(number: int, base: str, head_sha: str, user: str) -> bytes:
    """What an approver signs: this pull request's head, into this base, by this user."""
    return (
        f"denv approval\npull request: {number}\nbase: {base}\nhead: {head_sha}\napprover: {user}\n"
    ).encode()


def opening_message(number: int, head_branch: str, base: str, head_sha: str, author: str) -> bytes:
    """What an author signs on opening a pull request: this number, from this branch at this
    commit, into this base, by this author."""
    return (
        f"denv pull request\nnumber: {number}\nhead branch: {head_branch}\nbase: {base}\n"
        f"head: {head_sha}\nauthor: {author}\n"
    ).encode()


def _is_key(key_type: str, blob: str) -> bool:
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return False
    return raw[4 : 4 + len(key_type)] == key_type.encode()  # the blob names its own type


def allowed_signers_problems(text: str) -> list[tuple[int, str]]:
    """(line, what is wrong) for each line of an allowed signers file that is no signer."""
    problems = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.count('"') % 2:
            problems.append((number, f"unbalanced quotes: {_SIGNER_LINE}"))
            continue
        words = shlex.split(line, posix=False)  # a quoted word (options, principals) stays one
        at = next((i for i, w in enumerate(words) if w in KEY_TYPES), None)
        if at is None or at == 0 or at + 1 >= len(words):
            problems.append((number, f"{_SIGNER_LINE}, key types: {', '.join(sorted(KEY_TYPES))}"))
        elif not _is_key(words[at], words[at + 1]):
            problems.append((number, f"the {words[at]} key is not a base64 {words[at]} key"))
    return problems
