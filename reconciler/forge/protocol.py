"""Models: the `Forge` protocol that callers program against, and a bot change.

Two forges satisfy it: `GitHubForge` (github.py, PyGithub) and `LocalForge` (local.py, pull
requests as branches of the local repository). Callers hand it text and views, never
domain types.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from reconciler.forge.models import (
    Approvals,
    CheckRun,
    Comment,
    CommentCommand,
    MergeOutcome,
    PrState,
    PullRequest,
)
from reconciler.spec.yamlio import YamlDoc


class BotFiles(Protocol):
    """What an edit callback sees: the base branch's files, edited in memory."""

    def exists(self, path: str) -> bool: ...

    def yaml(self, path: str) -> YamlDoc:
        """The file as a round-trip document; change it with `.set(...)`: comments survive."""
        ...

    def write(self, path: str, text: str) -> None:
        """Write a whole file (a new release, say)."""
        ...


Edit = Callable[[BotFiles], None]


@dataclass(frozen=True)
class BotChange:
    """A pull request the bot opens from its own branch, or updates when it already exists."""

    branch: str
    title: str
    body: str
    message: str  # the commit message
    edit: Edit
    base: str | None = None  # None: the forge's default branch


@dataclass(frozen=True)
class BotIdentity:
    """The author of the bot's commits; commits by anyone else on its branch stop it."""

    name: str = "denv-bot"
    email: str = "denv-bot@users.noreply.github.com"


DENV_BOT = BotIdentity()
# A local forge's default branch, unless DENV_DEFAULT_BRANCH names another (GitHub's is the
# repository's own setting).
DEFAULT_BRANCH = "main"


class Forge(Protocol):
    def default_branch(self) -> str:
        """The repository's default branch: the one trusted ref whose fleets, policies, parity
        suites and allowed signers decide everything a pull request triggers (never the pull
        request's own base, which its author chooses)."""
        ...

    def pull_request(self, number: int) -> PullRequest: ...

    def pull_requests(self, state: PrState = PrState.OPEN) -> list[PullRequest]:
        """Those the forge can read; `unreadable()` names any it cannot."""
        ...

    def unreadable(self) -> list[str]:
        """Pull requests whose records cannot be read, each named with its file and repair
        (the local forge's; GitHub keeps its own and answers or fails as a whole)."""
        ...

    def bot_author(self) -> str:
        """Who the bot's pull requests are by on this forge."""
        ...

    def landed(self, shas: Sequence[str]) -> set[str]:
        """Those of these commits the default branch holds (its tip or an ancestor of it)."""
        ...

    def comments(self, pr: int) -> list[Comment]: ...

    def own_comments(self, pr: int) -> list[Comment]:
        """The bot's own comments: the only ones whose markers it edits or trusts (anyone
        can paste a marker into a comment of theirs)."""
        ...

    def upsert_comment(self, pr: int, kind: str, body: str) -> list[int]:
        """Post or edit in place the comment(s) marked `<!-- denv:KIND -->`; their ids."""
        ...

    def set_check(self, head_sha: str, check: CheckRun) -> None:
        """Create or update the check run of that name on that commit."""
        ...

    def checks(self, head_sha: str) -> list[CheckRun]: ...

    def approvals(self, pr: int, approvers: Sequence[str] = ()) -> Approvals:
        """Approvals of the head commit by reviewers with write permission, or only by those
        named in `approvers` (users, or org/team) when the policy names any."""
        ...

    def open_or_update_bot_pr(self, change: BotChange) -> PullRequest: ...

    def merge(self, pr: int, head_sha: str | None = None, auto: bool = False) -> MergeOutcome:
        """Merge now (only if the head is still `head_sha`), or with `auto` let the forge
        merge once its required checks pass."""
        ...

    def close_pr(self, pr: int, comment: str) -> PullRequest:
        """Close an open pull request without merging, with a comment saying why (marked
        `<!-- denv:closed -->`, so a repeat edits it); a closed or merged one is left as is."""
        ...

    def comment_commands(self, pr: int) -> list[CommentCommand]: ...
