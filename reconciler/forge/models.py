"""Models: what a forge says about pull requests, in denv's own words (no PyGithub types)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PrState(StrEnum):
    OPEN = "open"
    MERGED = "merged"
    CLOSED = "closed"


class PullRequest(Record):
    number: int
    title: str
    body: str
    author: str
    head_branch: str
    head_sha: str
    base_branch: str
    state: PrState
    url: str
    from_fork: bool = False  # a fork's code never runs where secrets are


class Conclusion(StrEnum):
    """A check run's conclusion (GitHub's names)."""

    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"
    SKIPPED = "skipped"
    ACTION_REQUIRED = "action_required"

    @property
    def blocks(self) -> bool:
        return self in (Conclusion.FAILURE, Conclusion.ACTION_REQUIRED)


class CheckRun(Record):
    name: str
    title: str
    summary: str
    conclusion: Conclusion


class ReviewState(StrEnum):
    APPROVED = "APPROVED"
    CHANGES_REQUESTED = "CHANGES_REQUESTED"
    COMMENTED = "COMMENTED"
    DISMISSED = "DISMISSED"


class Review(Record):
    user: str
    state: ReviewState
    commit: str  # the head commit the review was given on
    at: datetime
    # the local forge: the reviewer's SSH signature of what they approved (commands.py)
    signature: str | None = None


class Ignored(Record):
    user: str
    reason: str


class Approvals(Record):
    """Approvals of the current head that count, and the ones that do not, with why."""

    head_sha: str
    counted: list[str]
    ignored: list[Ignored]
    # the local forge: why the opening does not name the pull request's author (then it
    # cannot merge); None when it does, and always on GitHub, which knows its authors
    opening: str | None = None

    @property
    def count(self) -> int:
        return len(self.counted)


class Comment(Record):
    id: int
    author: str
    body: str
    at: datetime
    # the pull request's head when the comment was made, where the forge records it (the
    # local forge does; GitHub does not say, so a command there names its commit)
    head_sha: str | None = None


class CommentCommand(Record):
    """`/denv NAME …` from a user with write permission (pr/commands.py knows the names)."""

    comment_id: int
    user: str
    command: str  # NAME: lowercase letters, digits and '-' (forge/commands.py)
    args: list[str]
    at: datetime
    # the commit it was given on: the one it names, else the head when it was commented
    head_sha: str | None = None


class MergeStatus(StrEnum):
    MERGED = "merged"
    AUTO_MERGE = "auto_merge"  # the forge merges once its own required checks pass
    REFUSED = "refused"


class MergeOutcome(Record):
    """Expected refusals (conflicts, a head that moved) are data, not exceptions."""

    status: MergeStatus
    sha: str | None = None
    reason: str = ""
