"""Adapter: the bot's pull requests found on the forge itself, every pass — never only those
it remembers. A step the bot was killed in the middle of (a merge written, the record of it
not) leaves an open pull request whose head the default branch holds already: it is closed,
with a comment saying why. Records the forge cannot read are named, and their pull requests
left alone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from reconciler.errors import DenvError
from reconciler.forge.models import PrState, PullRequest
from reconciler.forge.protocol import Forge

# The branches the bot opens pull requests from: promotions and rollbacks (denv/…),
# `denv deploy` (deploy/…) and `denv optimize` (optimize/…).
BOT_BRANCHES = ("denv/", "deploy/", "optimize/")


@dataclass
class Swept:
    closed: list[PullRequest] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def landed_text(sha: str, branch: str) -> str:
    return (
        f"Closed by denv: its head `{sha[:12]}` is in `{branch}` already (merged, the bot "
        "stopped before it recorded so, or pushed there directly): nothing is left to merge."
    )


def bot_prs(forge: Forge) -> list[PullRequest]:
    """The open pull requests from the bot's branches, by the bot."""
    me = forge.bot_author()
    return [
        pr
        for pr in forge.pull_requests(PrState.OPEN)
        if pr.author == me and pr.head_branch.startswith(BOT_BRANCHES) and not pr.from_fork
    ]


def sweep(forge: Forge, say: Callable[[str], None]) -> Swept:
    """Close the bot's open pull requests whose head the default branch holds; say what it
    did and what it could not read. A forge that fails is said, and tried again next pass."""
    swept = Swept()
    try:
        swept.unreadable = forge.unreadable()
        mine = bot_prs(forge)
        landed = forge.landed([pr.head_sha for pr in mine])
        default = forge.default_branch() if landed else ""
        for pr in mine:
            if pr.head_sha in landed:
                swept.closed.append(forge.close_pr(pr.number, landed_text(pr.head_sha, default)))
                say(f"forge: closed #{pr.number} ({pr.head_branch}): its head is in {default}")
    except DenvError as exc:
        swept.errors.append(str(exc))
        say(f"forge: {exc}")
    for problem in swept.unreadable:
        say(f"forge: {problem}")
    return swept
