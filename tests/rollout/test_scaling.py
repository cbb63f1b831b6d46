"""An elastic deployment's next count (rollout/scaling.decide): bounds, the predictive need,
the reactive step, the delays that keep it from flapping, pending capacity given up at once,
and the history that carries it from one bot to the next."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from reconciler.rollout.scaling import MAX_EVENTS, History, Signals, decide
from reconciler.spec.scaling import ReplicaBounds, ScaleDown, ScaleUp, ScalingPolicy

T0 = 1_800_000_000.0
BOUNDS = ReplicaBounds(min=1, max=8)
# one replica holds 10 req/s at its targets, run at half: 5 req/s each
POLICY = ScalingPolicy(
    target_utilization=0.5,
    up=ScaleUp(delay=0, step=4),
    down=ScaleDown(delay=60, step=1),
)


def rate(arrival: float, serving: int = 1) -> Signals:
    """Only the predictive signal: `arrival` req/s, nothing waiting, caches cool."""
    return Signals(serving=serving, arrival_rps=arrival, capacity_rps=10.0, waiting=0, kv_usage=0.1)


IDLE = Signals(serving=1, waiting=0, kv_usage=0.1)  # no prediction: nothing waits


def once(
    signals: Signals,
    count: int = 2,
    pending: int = 0,
    policy: ScalingPolicy = POLICY,
    bounds: ReplicaBounds = BOUNDS,
) -> tuple[int, str]:
    decision = decide(policy, bounds, count, pending, signals, History(), T0)
    return decision.count, decision.reason


@pytest.mark.parametrize(
    ("signals", "count", "bounds", "wanted"),
    [
        (rate(100.0), 3, ReplicaBounds(min=1, max=4), 4),  # needs 20: max
        (rate(0.5), 1, ReplicaBounds(min=2, max=4), 2),  # needs 1: min, up at once
        (rate(100.0), 3, ReplicaBounds(min=1, max=3), 3),  # at max: stays
        (rate(100.0), 1, BOUNDS, 5),  # needs 20: one decision adds up.step
    ],
    ids=["max", "min", "at-max", "up-step"],
)
def test_the_count_stays_in_the_bounds(
    signals: Signals, count: int, bounds: ReplicaBounds, wanted: int
) -> None:
    policy = POLICY.model_copy(update={"down": ScaleDown(delay=0)})
    assert once(signals, count, bounds=bounds, policy=policy)[0] == wanted


@pytest.mark.parametrize(
    ("arrival", "wanted"),
    [(4.9, 1), (5.0, 1), (5.1, 2), (14.0, 3), (20.0, 4)],
)
def test_the_predictive_need_is_the_arrival_over_a_replica_at_its_utilization(
    arrival: float, wanted: int
) -> None:
    count, reason = once(rate(arrival), count=1)
    assert count == wanted
    assert reason == f"{arrival:.3g} req/s over 10 per replica"


def test_without_a_capacity_or_with_prediction_off_there_is_no_need() -> None:
    no_capacity = Signals(serving=1, arrival_rps=50.0, waiting=1, kv_usage=0.2)
    assert once(no_capacity) == (2, "steady")
    off = POLICY.model_copy(update={"predictive": False})
    one_waiting = Signals(serving=2, arrival_rps=50.0, capacity_rps=10.0, waiting=1)
    assert once(one_waiting, policy=off) == (2, "steady")


@pytest.mark.parametrize(
    ("signals", "reason"),
    [
        (Signals(serving=2, waiting=3, kv_usage=0.2), "3 requests waiting on a replica"),
        (Signals(serving=2, waiting=0, kv_usage=0.95), "KV cache 95% full"),
        (Signals(serving=2, waiting=0, firing=("ttft-p99-1.5s",)), "alarm ttft-p99-1.5s firing"),
        # the prediction is met, but requests queue: one more than runs
        (Signals(serving=2, arrival_rps=1.0, capacity_rps=10.0, waiting=5),
         "5 requests waiting on a replica"),
    ],
    ids=["waiting", "kv", "alarm", "over-the-prediction"],
)  # fmt: skip
def test_reactive_pressure_adds_one(signals: Signals, reason: str) -> None:
    assert once(signals, count=2) == (3, reason)


def test_an_alarm_adds_nothing_when_the_policy_ignores_alarms() -> None:
    policy = POLICY.model_copy(update={"alarms": False})
    firing = Signals(serving=2, waiting=1, firing=("ttft-p99-1.5s",))
    assert once(firing, policy=policy) == (2, "steady")


def test_up_waits_its_delay_of_asking() -> None:
    policy = POLICY.model_copy(update={"up": ScaleUp(delay=30, step=1)})
    history = History()
    busy = Signals(serving=1, waiting=4)
    first = decide(policy, BOUNDS, 1, 0, busy, history, T0)
    assert (first.count, first.reason) == (1, "4 requests waiting on a replica; up in 30s")
    assert decide(policy, BOUNDS, 1, 0, busy, history, T0 + 29).count == 1
    calm = decide(policy, BOUNDS, 1, 0, rate(1.0), history, T0 + 29.5)  # the asking stopped
    assert calm.count == 1 and history.up_since is None
    assert decide(policy, BOUNDS, 1, 0, busy, history, T0 + 40).count == 1  # asks anew
    up = decide(policy, BOUNDS, 1, 0, busy, history, T0 + 70)
    assert up.count == 2
    assert [(e["from"], e["to"], e["at"]) for e in history.events or []] == [(1, 2, T0 + 70)]


def test_down_waits_its_delay_of_every_signal_allowing_it() -> None:
    history = History()
    first = decide(POLICY, BOUNDS, 3, 0, rate(4.0), history, T0)  # needs 1
    assert (first.count, first.reason) == (3, "4 req/s over 10 per replica; down in 60s")
    assert decide(POLICY, BOUNDS, 3, 0, rate(4.0), history, T0 + 59).count == 3
    # a moment of load the three are needed for: the delay starts again
    assert decide(POLICY, BOUNDS, 3, 0, rate(12.0), history, T0 + 59.5).count == 3
    assert decide(POLICY, BOUNDS, 3, 0, rate(4.0), history, T0 + 100).count == 3
    down = decide(POLICY, BOUNDS, 3, 0, rate(4.0), history, T0 + 160)
    assert down.count == 2  # down.step: one at a time
    # the next one waits the delay again, counted from that change
    assert decide(POLICY, BOUNDS, 2, 0, rate(4.0), history, T0 + 161).count == 2
    assert decide(POLICY, BOUNDS, 2, 0, rate(4.0), history, T0 + 219).count == 2
    assert decide(POLICY, BOUNDS, 2, 0, rate(4.0), history, T0 + 221).count == 1


def test_down_waits_its_delay_after_the_last_change() -> None:
    """A history whose last change came after the signals began to allow fewer (a bot that
    carried on from a note): the count holds until the delay after that change."""
    history = History(changed_at=T0 + 50, down_since=T0)
    held = decide(POLICY, BOUNDS, 3, 0, IDLE, history, T0 + 80)
    assert (held.count, held.reason) == (3, "no request waiting; down in 30s")
    assert decide(POLICY, BOUNDS, 3, 0, IDLE, history, T0 + 111).count == 2


def test_without_a_prediction_an_idle_deployment_goes_down() -> None:
    policy = POLICY.model_copy(update={"down": ScaleDown(delay=0)})
    assert once(IDLE, count=3, policy=policy) == (2, "no request waiting")
    warm = Signals(serving=3, waiting=0, kv_usage=0.6)  # caches half full: kept
    assert once(warm, count=3, policy=policy) == (3, "steady")
    silent = Signals(serving=0)  # nothing answered (starting): nothing decided
    assert once(silent, count=3, policy=policy) == (3, "steady")


@pytest.mark.parametrize(
    ("arrival", "wanted"),
    [(9.5, 3), (13.0, 3), (9.0, 2)],  # 2 hold 10: 9.5 x 1.1 is over it, 9 x 1.1 is not
    ids=["inside-headroom", "needs-three", "below-headroom"],
)
def test_a_scale_down_keeps_ten_percent_headroom(arrival: float, wanted: int) -> None:
    policy = POLICY.model_copy(update={"down": ScaleDown(delay=0)})
    count, reason = once(rate(arrival), count=3, policy=policy)
    assert count == wanted
    if arrival == 9.5:
        assert reason == "within the headroom of a scale-down"


def test_pending_replicas_go_with_the_first_step_down_after_the_delay() -> None:
    """Given up after the same delays as any replica (a need wavering around what fits does
    not ask, give up and ask again), and all at once beside down.step running ones: capacity
    that never came never slows a scale-down."""
    history = History()
    waited = decide(POLICY, BOUNDS, 4, 2, rate(4.0), history, T0)  # 2 of the 4 never came
    assert (waited.count, waited.reason) == (4, "4 req/s over 10 per replica; down in 60s")
    given_up = decide(POLICY, BOUNDS, 4, 2, rate(4.0), history, T0 + 60)
    reason = "4 req/s over 10 per replica; pending given up"
    assert (given_up.count, given_up.reason) == (1, reason)  # 2 pending and 1 running
    assert history.events and history.events[-1]["to"] == 1


def flaps(events: list[dict[str, object]], delay: float) -> int:
    """Changes that reverse the one before within `delay` of it."""
    count = 0
    for before, after in itertools.pairwise(events):
        first = float(str(before["to"])) - float(str(before["from"]))
        second = float(str(after["to"])) - float(str(after["from"]))
        within = float(str(after["at"])) - float(str(before["at"])) < delay
        count += int(first * second < 0 and within)
    return count


def replay(arrivals: list[float], seconds: float = 1.0) -> tuple[list[int], History]:
    """The count decided each `seconds` under `arrivals`, the fleets running what it says."""
    history, count, counts = History(), 1, []
    for i, arrival in enumerate(arrivals):
        now = T0 + i * seconds
        count = decide(POLICY, BOUNDS, count, 0, rate(arrival, count), history, now).count
        counts.append(count)
    return counts, history


def test_noise_around_a_boundary_never_flaps() -> None:
    noisy = random.Random(7)
    arrivals = [10.0 * noisy.uniform(0.92, 1.08) for _ in range(600)]  # needs 2 or 3
    counts, history = replay(arrivals)
    assert counts[-1] == 3 and set(counts[1:]) <= {2, 3}
    events = history.events or []
    assert flaps(events, POLICY.down.delay) == 0
    assert len(events) <= 2, events  # up to 3 and stays (the headroom holds 2 back)


def test_a_day_shaped_trace_follows_the_load_never_down_within_the_delay() -> None:
    noisy = random.Random(11)
    # 30 req/s at the peak, 3 at the trough, bursts on the way
    day = [
        (3 + 27 * math.sin(math.pi * i / 2400) ** 2) * noisy.uniform(0.9, 1.1)
        + (15 if 300 < i % 400 < 305 else 0)
        for i in range(2400)
    ]
    counts, history = replay(day)
    events = history.events or []
    assert max(counts) == BOUNDS.max  # the bursts reach the bound
    assert min(counts[1100:1300]) >= 6  # 30 req/s at 5 each
    # a down never comes within the delay of any change (a burst may follow a down at once)
    for before, after in itertools.pairwise(events):
        if int(str(after["to"])) < int(str(after["from"])):  # a down: the delay after a change
            assert float(str(after["at"])) - float(str(before["at"])) >= POLICY.down.delay
    ups = [e for e in events if int(str(e["to"])) > int(str(e["from"]))]
    assert ups and all("req/s over" in str(e["reason"]) for e in ups)


def test_the_history_survives_the_lease_note() -> None:
    history = History()
    decide(POLICY, BOUNDS, 1, 0, rate(30.0), history, T0)
    decide(POLICY, BOUNDS, 5, 0, Signals(serving=5, waiting=9), history, T0 + 5)
    decide(POLICY, BOUNDS, 6, 0, rate(4.0), history, T0 + 6)  # down_since set
    kept = json.loads(json.dumps(history.as_dict()))
    assert History.of(kept) == history
    [up, busy] = kept["events"]
    assert (up["from"], up["to"], up["arrival_rps"], up["capacity_rps"]) == (1, 5, 30.0, 10.0)
    assert (busy["from"], busy["to"], busy["waiting"], busy["reason"]) == (
        5,
        6,
        9,
        "9 requests waiting on a replica",
    )
    assert history.down_since == T0 + 6


def test_the_history_keeps_the_last_events_and_reads_junk_as_empty() -> None:
    history = History(events=[{"at": float(i)} for i in range(MAX_EVENTS + 50)])
    kept = history.as_dict()["events"]
    assert len(kept) == MAX_EVENTS and kept[0] == {"at": 50.0}
    assert History.of("junk") == History(events=None)
    assert History.of({"changed_at": True, "events": [1, {"at": 2}]}) == History(events=[{"at": 2}])


def test_pressure_asks_for_nothing_more_while_a_replica_is_pending() -> None:
    """Queues on the two that run cannot be helped by asking again for the third that has no
    GPU: the count stays (and so does the pending ask); a prediction may still ask for more."""
    busy = Signals(serving=2, waiting=4)
    assert once(busy, count=3, pending=1) == (3, "4 requests waiting on a replica")
    assert once(busy, count=3, pending=0) == (4, "4 requests waiting on a replica")
    more = Signals(serving=2, waiting=4, arrival_rps=24.0, capacity_rps=10.0)  # needs 5
    assert once(more, count=3, pending=1)[0] == 5
