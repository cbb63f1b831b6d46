"""Pure logic: one stage's progress, one step per reconcile pass.

    deploying --every replica ready--> baking --bake elapsed, no alarm, parity ok--> green
    baking --an alarm fires (also read at the pass that finds a replica lost)--> rolled back
        (to the last good revision, at once)
    green --an alarm fires, with rollback_on_alarm: always--> rolled back

A new revision from git starts again at deploying; what the stage ran before becomes its
`previous`. A revision that is rejected never bakes or promotes: the stage runs its last good
revision (an override kept until git no longer names the rejected one). A rejection holds
for the stage that rolled it back (and for promotions, promote.py); another stage already
running the revision keeps it until its own alarms fire, but never returns to it.
"""

from __future__ import annotations

from reconciler.rollout.state import Phase, RollBack, StageEffect, StageFacts, StageRecord


def last_good(
    record: StageRecord | None, bad: str, rejected: frozenset[str], fallback: str | None
) -> str | None:
    """Where a rollback of `bad` goes: the last green revision here, else the one that ran
    before, else the newest earlier one git knows (`fallback`); never a rejected one."""
    known: tuple[str | None, ...] = (record.good, record.previous) if record else ()
    for candidate in (*known, fallback):
        if candidate and candidate != bad and candidate not in rejected:
            return candidate
    return None


def _moved(record: StageRecord, facts: StageFacts) -> StageRecord:
    """A record for the revision git now names; what lasts across revisions is kept."""
    never = facts.rejected | facts.elsewhere
    previous = record.revision if record.revision not in never else record.previous
    if record.override:  # it ran the override, not the rejected revision
        previous = record.override
    return StageRecord(
        revision=facts.revision,
        digest=facts.digest,
        phase=Phase.DEPLOYING,
        since=facts.now,
        good=record.good,
        previous=previous,
        promotion=record.promotion,
    )


def step(record: StageRecord | None, facts: StageFacts) -> tuple[StageRecord, RollBack | None]:
    """The stage's record after this pass, and a rollback to make, if any."""
    if facts.revision is None:
        return StageRecord(phase=Phase.PENDING, good=record.good if record else None), None
    record = record or StageRecord(revision=facts.revision, digest=facts.digest, since=facts.now)
    if record.revision != facts.revision:
        record = _moved(record, facts)
    record = record.model_copy(
        update={"alarms": list(facts.alarms), "digest": facts.digest, "ready": facts.ready}
    )
    if facts.revision in facts.rejected:
        return _rejected(record, facts), None
    if record.phase in (Phase.ROLLED_BACK, Phase.REJECTED):  # git took the rejection back
        record = record.model_copy(update={"phase": Phase.DEPLOYING, "override": None})
    firing = [a for a in facts.alarms if a.firing]
    watched = record.phase in (Phase.DEPLOYING, Phase.BAKING, Phase.DEGRADED) or (
        record.phase == Phase.GREEN and facts.rollback_after_bake
    )
    if firing and watched:  # a replica lost under load: the requests it failed count
        return _roll_back(record, facts, "; ".join(a.text for a in firing))
    if not facts.ready:
        if record.phase in (Phase.BAKING, Phase.DEGRADED):  # a replica went away: bake again
            return record.model_copy(update={"phase": Phase.DEPLOYING, "ready_at": None}), None
        if record.phase == Phase.GREEN:
            return record, None  # green stays green; a lost replica is the reconciler's work
        return record.model_copy(update={"phase": Phase.DEPLOYING}), None
    if record.phase == Phase.GREEN:
        return record, None
    ready_at = record.ready_at if record.ready_at is not None else facts.now
    record = record.model_copy(update={"ready_at": ready_at, "phase": Phase.BAKING})
    if facts.parity is not None and facts.parity != "passed":
        phase = Phase.DEGRADED if facts.parity in ("failed", "error") else Phase.BAKING
        why = f"deploy-time parity {facts.parity}"
        return record.model_copy(update={"phase": phase, "reason": why}), None
    if facts.now - ready_at >= facts.bake:
        green = {"phase": Phase.GREEN, "green_at": facts.now, "good": record.revision}
        return record.model_copy(update=green | {"reason": ""}), None
    return record, None


def _roll_back(
    record: StageRecord, facts: StageFacts, reason: str
) -> tuple[StageRecord, RollBack | None]:
    bad = record.revision
    assert bad is not None
    target = last_good(record, bad, facts.rejected | facts.elsewhere, facts.fallback)
    phase = Phase.ROLLED_BACK if target else Phase.REJECTED
    updated = record.model_copy(
        update={
            "phase": phase,
            "override": target,
            "rolled_back": bad,
            "rolled_back_at": facts.now,
            "reason": reason,
            "ready_at": None,
        }
    )
    return updated, RollBack(key=facts.key, bad=bad, target=target, reason=reason)


def _rejected(record: StageRecord, facts: StageFacts) -> StageRecord:
    """Git (or the bot) rejected the revision git names: keep to the last good one."""
    bad = facts.revision
    assert bad is not None
    target = record.override if record.rolled_back == bad else None
    target = target or last_good(record, bad, facts.rejected | facts.elsewhere, facts.fallback)
    return record.model_copy(
        update={
            "phase": Phase.ROLLED_BACK if target else Phase.REJECTED,
            "override": target,
            "rolled_back": bad,
            "reason": record.reason or "rejected",
        }
    )


def wants_promotion(
    record: StageRecord, next_pin: str | None, next_digest: str | None, rejected: frozenset[str]
) -> bool:
    """Stage k is green at a revision stage k+1 does not run yet (by content), not rejected."""
    return (
        record.phase == Phase.GREEN
        and record.revision is not None
        and record.revision not in rejected
        and record.revision != next_pin
        and (record.digest is None or record.digest != next_digest)
    )


def unhealthy(stage: str, record: StageRecord) -> str:
    """Why the stage a promotion comes from may not promote at this moment ('' when it may):
    a green stage stays green when a replica dies, so the merge looks again."""
    if not record.ready:
        return f"{stage} is not ready (a replica is down or being replaced)"
    firing = [a.text for a in record.alarms if a.firing]
    return f"{stage} alarm firing: {'; '.join(firing)}" if firing else ""


def rollback_effects(
    stages: list[tuple[str, str | None]], rolled: str, bad: str, target: str | None
) -> list[StageEffect]:
    """What rolling `bad` back on stage `rolled` does to each stage, in the release's order;
    `stages` gives each stage's name and the revision it runs."""
    names = [name for name, _ in stages]
    found: list[StageEffect] = []
    for index, (name, runs) in enumerate(stages):
        later = rolled in names and index > names.index(rolled)
        if name == rolled:
            text = (
                f"rolled back from {bad[:12]} to {target[:12]}; {bad[:12]} rejected here"
                if target
                else f"{bad[:12]} rejected; nothing earlier to return to, so it keeps running it"
            )
            found.append(StageEffect(stage=name, runs=target or bad, text=text))
        elif runs == bad:
            tail = "" if later else f"; {bad[:12]} is not promoted from it"
            text = f"keeps running {bad[:12]}: rolled back only if its own alarms fire{tail}"
            found.append(StageEffect(stage=name, runs=runs, text=text))
        else:
            now = f"runs {runs[:12]}" if runs else "runs nothing yet"
            text = f"{now}; {bad[:12]} is never promoted to it" if later else f"{now}: unchanged"
            found.append(StageEffect(stage=name, runs=runs, text=text))
    return found
