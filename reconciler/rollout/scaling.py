"""Pure logic: an elastic deployment's next replica count — from its signals, its scaling
policy and what it decided before (docs/scaling.md).

Predictive: the arrival rate over what one replica serves at the stage's latency targets (the
simulator's capacity for the recipe, the hardware and the observed lengths), each replica run
at the policy's `target_utilization`. Reactive: requests waiting on the busiest replica, its
KV cache, or an alarm of the stage over its threshold ask for one more than runs (pending
replicas do not run: while one is pending, the pressure asks for nothing more). The count
stays within git's bounds. Hysteresis: up after `up.delay` of asking, down only after
`down.delay` of every signal allowing it *and* `down.delay` after the last change, with 10%
headroom on the prediction, so a count never reverses within the down delay; a gap between
decisions longer than the policy's window (a pass that waited on a start or a roll) starts
those delays again, since nothing was seen in it. Replicas asked for and never arrived
(pending) go with the first step down, beside `down.step` replicas that run: capacity that
did not come never holds a scale-down back nor slows it, and, given up after the same delays,
a need that wavers around the count that fits does not ask, give up and ask again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reconciler.spec.scaling import ReplicaBounds, ScalingPolicy

HEADROOM = 1.1  # a scale-down must still hold 10% more load than now
MAX_EVENTS = 200  # decisions kept per deployment (status --events, the UI's history)


@dataclass(frozen=True)
class Signals:
    serving: int  # replicas whose metrics answered (ready)
    arrival_rps: float | None = None  # requests/s the deployment answers lately
    waiting: float | None = None  # requests waiting on the busiest replica
    kv_usage: float | None = None  # the fullest replica's KV cache, 0..1
    firing: tuple[str, ...] = ()  # the stage's alarms over their threshold
    capacity_rps: float | None = None  # one replica at the stage's targets (simulated)
    lengths: tuple[int, int] | None = None  # the traffic's mean input and output tokens
    note: str = ""  # why a signal is missing

    def as_dict(self) -> dict[str, Any]:
        return {
            "serving": self.serving,
            "arrival_rps": _round(self.arrival_rps),
            "waiting": _round(self.waiting),
            "kv_usage": _round(self.kv_usage),
            "firing": list(self.firing),
            "capacity_rps": _round(self.capacity_rps),
            "input_length": self.lengths[0] if self.lengths else None,
            "output_length": self.lengths[1] if self.lengths else None,
            "note": self.note,
        }


@dataclass
class History:
    """What one deployment's decisions keep between passes (in the bot's lease note)."""

    changed_at: float | None = None  # when the count last changed
    up_since: float | None = None  # since when a signal asks for more
    down_since: float | None = None  # since when every signal allows fewer
    decided_at: float | None = None  # the last decision (the policy's interval)
    events: list[dict[str, Any]] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "changed_at": self.changed_at,
            "up_since": self.up_since,
            "down_since": self.down_since,
            "decided_at": self.decided_at,
            "events": list(self.events or [])[-MAX_EVENTS:],
        }

    @classmethod
    def of(cls, data: Any) -> History:
        if not isinstance(data, dict):
            return cls()
        events = data.get("events")
        return cls(
            changed_at=as_number(data.get("changed_at")),
            up_since=as_number(data.get("up_since")),
            down_since=as_number(data.get("down_since")),
            decided_at=as_number(data.get("decided_at")),
            events=[e for e in events if isinstance(e, dict)] if isinstance(events, list) else [],
        )


@dataclass(frozen=True)
class Decision:
    count: int
    reason: str


def needed(policy: ScalingPolicy, signals: Signals, load: float = 1.0) -> int | None:
    """Replicas the arrival rate needs at the policy's utilization; None without a capacity."""
    if not policy.predictive or signals.capacity_rps is None or signals.arrival_rps is None:
        return None
    per_replica = signals.capacity_rps * policy.target_utilization
    return max(1, math.ceil(signals.arrival_rps * load / per_replica - 1e-9))


def pressure(policy: ScalingPolicy, signals: Signals) -> str | None:
    """Why the replicas that run are not enough now (reactive), or None."""
    if signals.waiting is not None and signals.waiting > policy.max_waiting_per_replica:
        return f"{signals.waiting:g} requests waiting on a replica"
    if signals.kv_usage is not None and signals.kv_usage > policy.max_kv_usage:
        return f"KV cache {signals.kv_usage:.0%} full"
    if policy.alarms and signals.firing:
        return f"alarm {', '.join(signals.firing)} firing"
    return None


def decide(
    policy: ScalingPolicy,
    bounds: ReplicaBounds,
    count: int,
    pending: int,
    signals: Signals,
    history: History,
    now: float,
) -> Decision:
    """The count to run (`count` replicas are asked for now, `pending` of them never came);
    `history` is updated in place."""
    if history.decided_at is not None and now - history.decided_at > policy.window:
        # nothing was seen for longer than the window (a pass waited on a start or a roll):
        # a delay counts only what was seen, so it starts again
        history.up_since = history.down_since = None
    history.decided_at = now
    need = needed(policy, signals)
    busy = pressure(policy, signals)
    want, why = count, "steady"
    if busy is not None:  # one more, unless one asked for has not arrived yet
        want, why = max(count + (0 if pending else 1), need or 0), busy
    elif need is not None:
        want = need
        why = f"{signals.arrival_rps:.3g} req/s over {signals.capacity_rps:.3g} per replica"
        if need < count and (needed(policy, signals, HEADROOM) or 0) >= count:
            want, why = count, "within the headroom of a scale-down"
    elif _idle(signals):
        want, why = count - 1, "no request waiting"
    want = bounds.clamp(want)
    if want > count:
        history.down_since = None
        history.up_since = history.up_since if history.up_since is not None else now
        if now - history.up_since < policy.up.delay:
            return Decision(
                count, f"{why}; up in {policy.up.delay - (now - history.up_since):.0f}s"
            )
        history.up_since = None
        return _changed(history, count, min(want, count + policy.up.step), why, signals, now)
    history.up_since = None
    if want == count:
        history.down_since = None
        return Decision(count, why)
    history.down_since = history.down_since if history.down_since is not None else now
    since = max(history.down_since, history.changed_at or history.down_since)
    if now - since < policy.down.delay:
        left = policy.down.delay - (now - since)
        return Decision(count, f"{why}; down in {left:.0f}s")
    history.down_since = None
    if pending:  # never came: given up with the first step, beside down.step that run
        why += "; pending given up"
    after = max(want, count - pending - policy.down.step)
    return _changed(history, count, after, why, signals, now)


def _idle(signals: Signals) -> bool:
    """Without a prediction: fewer replicas when nothing waits and the caches are half empty."""
    return (
        signals.serving > 0
        and signals.waiting is not None
        and signals.waiting == 0
        and (signals.kv_usage or 0.0) < 0.5
        and not signals.firing
    )


def _changed(
    history: History, before: int, after: int, why: str, signals: Signals, now: float
) -> Decision:
    if after == before:
        return Decision(before, why)
    history.changed_at = now
    events = history.events if history.events is not None else []
    events.append({"at": now, "from": before, "to": after, "reason": why, **signals.as_dict()})
    history.events = events[-MAX_EVENTS:]
    return Decision(after, why)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def as_number(value: Any) -> float | None:
    """A number read from the note, else None (booleans are not numbers here)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
