"""Pure logic: `denv rollout status` — per stage, the revision git names and the one running,
its state in words (deploying, baking 12m/30m, green, waiting for approval, rolled back,
rejected), its alarms, and whether it runs a revision another stage rolled back, from the
release, its pins and the bot's kept state; and, for `denv status`, the stages a rollback
override makes run other than what git names."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

from reconciler.reconcile.revisions import Stages
from reconciler.rollout.evidence import duration
from reconciler.rollout.state import AlarmValue, Phase, RolloutState, StageRecord
from reconciler.spec.release import Promotions, Release


class Unrecorded(StrEnum):
    """A stage's state while the bot has not recorded it for the revision git names: the same
    words in `denv status`, `denv rollout status` and every page of the UI."""

    NOT_DEPLOYED = Phase.PENDING.value  # git names no revision for the stage yet (no pin)
    WAITING = "waiting for the bot"  # no bot has recorded it: none has run, or its pass goes on
    HELD = "held: invalid file"  # its release's file (or recipe) is invalid on the branch


def fleet_state(words: str, drift: str | None, bot_ran: bool) -> str:
    """A stage's state on one of its fleets, from its `rollout status` words, the look's drift
    there and whether a bot has run on the fleet: while a bot's pass has units to start or
    replace for a stage it has not recorded yet, `deploying (start 3)`; before any bot has run
    there, nothing deploys: `waiting for the bot`."""
    if words != Unrecorded.WAITING or not bot_ran or not drift:
        return words
    if not any(kind in drift for kind in ("start", "replace")):
        return words
    return f"deploying ({drift})"


class StageStatus(BaseModel):
    stage: str
    fleets: list[str]
    revision: str | None  # what git names for the stage
    running: str | None  # what runs: an override's revision while a rollback is in force
    state: str
    promotion: str | None = None  # e.g. "PR #3 waiting for approval: 0 of 1 approvals"
    rollback_pr: int | None = None
    alarms: list[AlarmValue] = []
    errors: list[str] = []
    note: str = ""  # e.g. it runs a revision another stage rolled back


def _state(record: StageRecord, bake: float, now: float) -> str:
    if record.phase == Phase.BAKING and record.ready_at is not None:
        if now - record.ready_at >= bake:  # the bot's next pass judges it
            return f"baked {duration(bake)}, judged at the bot's next pass"
        return f"baking {duration(round(now - record.ready_at))}/{duration(bake)}"
    if record.phase == Phase.ROLLED_BACK and record.override:
        bad = (record.rolled_back or "")[:12]
        return f"rolled back to {record.override[:12]} ({bad} rejected: {record.reason})"
    if record.phase == Phase.REJECTED:
        return f"rejected, nothing earlier to return to ({record.reason})"
    if record.phase == Phase.DEGRADED:
        return f"degraded: {record.reason}"
    return record.phase.value


def rollout_status(
    name: str,
    release: Release,
    pins: Promotions | None,
    state: RolloutState | None,
    now: float,
    head_revision: str | None,
) -> list[StageStatus]:
    """`head_revision`: the first stage's release revision at the head."""
    kept = state or RolloutState()
    rows: list[StageStatus] = []
    rejections = _rejections(pins, kept)
    waiting: dict[str, str] = {}  # stage -> the open promotion PR moving its pin
    for stage in release.stages:
        found = kept.stages.get(f"{name}/{stage.name}")
        pr = found.promotion if found is not None else None
        if pr is not None and pr.state == "open":
            gate = "; ".join(pr.blockers) or "its checks"
            waiting[pr.stage] = f"PR #{pr.number} waiting for approval: {gate}"
    for index, stage in enumerate(release.stages):
        pin = pins.promotions.get(stage.name) if pins is not None else None
        revision = head_revision if index == 0 else (pin.revision if pin else None)
        record = kept.stages.get(f"{name}/{stage.name}")
        here = {r for r, on, _ in rejections if on in (None, stage.name)}
        if record is None or record.revision != revision:
            words = (Unrecorded.NOT_DEPLOYED if revision is None else Unrecorded.WAITING).value
            if revision in here:
                words = "rejected"
            record_state, running, alarms = words, revision, []
        else:
            record_state = _state(record, stage.bake or 0, now)
            running, alarms = record.override or record.revision, record.alarms
        promotion = waiting.get(stage.name)
        others = sorted(
            {on for r, on, _ in rejections if r == running and on and running not in here}
        )
        rows.append(
            StageStatus(
                stage=stage.name,
                fleets=list(stage.fleets),
                revision=revision,
                running=running,
                state=record_state,
                promotion=promotion,
                rollback_pr=record.rollback_pr if record else None,
                alarms=alarms,
                errors=record.errors if record else [],
                note=_kept_note(running, others),
            )
        )
    return rows


def _rejections(pins: Promotions | None, kept: RolloutState) -> list[tuple[str, str | None, str]]:
    """(revision, the stage it was rolled back on or None for every stage, why): git's, then
    the bot's not merged yet."""
    found = [(r.revision, r.stage, r.reason) for r in (pins.rejected if pins else [])]
    for revision, why in kept.rejected.items():
        on = kept.rejected_on.get(revision)
        stages: list[str | None] = list(on) if on else [None]
        found += [(revision, stage, why) for stage in stages]
    return found


def _kept_note(running: str | None, others: list[str]) -> str:
    """A stage that still runs a revision another stage rolled back says so."""
    if running is None or not others:
        return ""
    return (
        f"runs {running[:12]}, rolled back on {', '.join(others)}: kept here until this "
        "stage's own alarms fire; never promoted further"
    )


class Override(BaseModel):
    """A stage that runs another revision than git names: a rollback git has not recorded."""

    release: str
    stage: str
    named: str  # what git names (rejected)
    runs: str  # what the bot runs instead
    pr: int | None  # the rollback PR that records it

    def text(self) -> str:
        until = f"PR #{self.pr} merges" if self.pr else f"git stops naming {self.named[:12]}"
        where = f"{self.release}/{self.stage}"
        return f"rolled back: {where} runs {self.runs[:12]} (override until {until})"


def overrides(named: Stages, running: Stages, state: RolloutState) -> list[Override]:
    """Stages whose revision the bot's `adjust` hook changed (git's `named`, the bot's
    `running`), with the rollback PR the bot's state records for each."""
    wanted = {(s.release, s.stage): s.revision for s in named.running}
    found: list[Override] = []
    for stage in running.running:
        before = wanted.get((stage.release, stage.stage))
        if before is None or before == stage.revision:
            continue
        record = state.stages.get(f"{stage.release}/{stage.stage}")
        pr = record.rollback_pr if record is not None else None
        found.append(Override(release=stage.release, stage=stage.stage, named=before,
                              runs=stage.revision, pr=pr))  # fmt: skip
    return found
