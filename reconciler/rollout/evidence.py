"""Pure logic: the views of the bot's PR bodies, and the alarm values it keeps, from what a
pass found."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from reconciler.forge.views import AlarmRow, PromotionView, RollbackView
from reconciler.rollout.alarms import value_text
from reconciler.rollout.state import AlarmValue, StageEffect, StageRecord
from reconciler.spec.policy import Alarm
from reconciler.spec.release import Stage


def duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def limit(alarm: Alarm) -> str:
    return f"≤ {value_text(alarm.metric, alarm.max, 'g')} over {duration(alarm.window)}"


def alarm_value(reading: Any) -> AlarmValue:
    """From an alarm watch's reading (name, value, requests, firing, describe())."""
    return AlarmValue(
        name=reading.name,
        value=reading.value,
        requests=reading.requests,
        firing=reading.firing,
        text=reading.describe(),
    )


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def promotion_view(
    release: str,
    stage: Stage,
    to_stage: Stage,
    record: StageRecord,
    alarms: dict[str, Alarm],
    parity: str,
    approvals: str,
) -> PromotionView:
    assert record.revision is not None
    start = record.ready_at if record.ready_at is not None else record.green_at or 0.0
    rows = [
        AlarmRow(
            name=a.name,
            observed=a.text,
            limit=limit(alarms[a.name]) if a.name in alarms else "",
            ok=not a.firing,
            judged=a.value is not None,
        )
        for a in record.evidence or record.alarms
    ]
    return PromotionView(
        release=release,
        from_stage=stage.name,
        to_stage=to_stage.name,
        revision=record.revision,
        fleets=list(stage.fleets),
        baked_from=_at(start),
        baked_until=_at(record.green_at or start),
        bake=duration(stage.bake or 0),
        alarms=rows,
        parity=parity,
        approvals=approvals,
    )


def rollback_view(
    release: str,
    stage: Stage,
    bad: str,
    target: str,
    firing: list[AlarmValue],
    alarms: dict[str, Alarm],
    reason: str,
    at: float,
    effects: list[StageEffect],
) -> RollbackView:
    return RollbackView(
        release=release,
        stage=stage.name,
        fleets=list(stage.fleets),
        from_revision=bad,
        to_revision=target,
        alarm=", ".join(a.name for a in firing) or "none (a manual rollback)",
        observed="; ".join(a.text for a in firing) or reason,
        threshold="; ".join(limit(alarms[a.name]) for a in firing if a.name in alarms) or "—",
        at=_at(at),
        stages=[f"`{e.stage}`: {e.text}" for e in effects],
    )


def approvals_needed(stage: Stage, default: int, approvers: list[str]) -> tuple[int, str]:
    """(approvals the bot waits for, the sentence for the PR body)."""
    if stage.promotion == "auto":
        required = stage.approvals or 0
        if not required:
            return 0, "none: the stage promotes automatically once its checks pass"
    else:
        required = stage.approvals if stage.approvals is not None else default
    who = ", ".join(approvers) if approvers else "users with write permission"
    noun = "approval" if required == 1 else "approvals"
    return required, f"{required} {noun} of the head commit by {who}; then denv merges it"
