"""Models: what the rollout bot keeps between passes (with the reconciler's lease note) and
what it decides. Revisions here are release revisions (history.py), not head commits."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict


class Phase(StrEnum):
    PENDING = "not deployed"  # a later stage without a pin
    DEPLOYING = "deploying"  # not every replica is ready yet
    BAKING = "baking"
    GREEN = "green"
    DEGRADED = "degraded"  # deploy-time parity failed: no promotion
    ROLLED_BACK = "rolled back"  # runs its last good revision instead
    REJECTED = "rejected"  # rejected, with no earlier revision to return to


class Kept(BaseModel):
    model_config = ConfigDict(extra="ignore")  # an older bot's note loads too


class AlarmValue(Kept):
    """One alarm's reading, as shown in status and PR bodies."""

    name: str
    value: float | None  # None: not enough requests in the window yet
    requests: int
    firing: bool
    text: str


class PromotionPr(Kept):
    number: int
    url: str
    revision: str  # the release revision it pins for the next stage
    stage: str  # the stage whose pin it moves
    state: str = "open"  # open, merged, closed (by a person, or by the bot when stale)
    blockers: list[str] = []  # why it is not merged yet (or why the bot closed it)
    held: str = ""  # why its check says to wait (the stage it promotes from is unhealthy now)


class StageRecord(Kept):
    revision: str | None = None  # what git says the stage runs
    digest: str | None = None
    phase: Phase = Phase.PENDING
    ready: bool = False  # every replica ready at the last pass (green stays green without)
    since: float | None = None  # when the bot first saw this revision
    ready_at: float | None = None  # every replica ready: the bake started
    green_at: float | None = None
    good: str | None = None  # the last revision that baked green here
    previous: str | None = None  # the revision this stage ran before this one
    override: str | None = None  # run instead of `revision` (a rollback), until git moves
    rolled_back: str | None = None  # the revision the override replaces
    rolled_back_at: float | None = None  # the pass (its scrape) that decided the rollback
    reason: str = ""  # why it was rolled back, or what blocks it
    alarms: list[AlarmValue] = []
    evidence: list[AlarmValue] = []  # the alarms over the whole bake, read when it turned green
    promotion: PromotionPr | None = None  # the PR moving the next stage's pin
    rollback_pr: int | None = None
    rollback_url: str | None = None
    errors: list[str] = []  # forge errors of the last pass (retried next pass)


class RolloutState(Kept):
    stages: dict[str, StageRecord] = {}  # 'release/stage' -> record
    rejected: dict[str, str] = {}  # revision -> why, until git's promotions.yaml says so
    rejected_on: dict[str, list[str]] = {}  # revision -> the stages it was rolled back on
    alarms: dict[str, Any] = {}  # the alarm watch's own state
    checked_at: float | None = None  # the last pass (and its scrape): a stale bot shows


class StageFacts(BaseModel):
    """What one pass found about one stage; everything the state machine needs."""

    model_config = ConfigDict(frozen=True)

    key: str
    revision: str | None  # git's: the head's release revision, or the pin
    digest: str | None
    bake: float  # seconds; 0: green once ready
    rejected: frozenset[str]  # revisions this stage must not run (rolled back here)
    ready: bool  # every replica on every fleet ready, at what is wanted now
    running: str | None  # the revision it runs (an override's, while one is in force)
    parity: str | None  # deploy-time parity: passed, failed, error, waiting; None: not mixed
    alarms: tuple[AlarmValue, ...] = ()
    rollback_after_bake: bool = False  # gates.rollback_on_alarm: always
    fallback: str | None = None  # the newest earlier revision not rejected (from git)
    elsewhere: frozenset[str] = frozenset()  # rolled back on other stages: never a target here
    now: float


class RollBack(BaseModel):
    """Return the stage to `target` now and record it with a PR."""

    model_config = ConfigDict(frozen=True)

    key: str
    bad: str
    target: str | None  # None: nothing earlier to return to
    reason: str


class StageEffect(BaseModel):
    """What a rollback did to one stage of the release, in words."""

    model_config = ConfigDict(frozen=True)

    stage: str
    runs: str | None  # the revision it runs after the rollback
    text: str  # e.g. "keeps running 4e1d…: rolled back only if its own alarms fire"
