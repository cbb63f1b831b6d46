"""What `denv status` and the UI read of the bots' scaling decisions from their lease notes:
the counts they keep, the newest decision of each deployment, and every event once, oldest
first, whatever else a note holds."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.rollout.scaled import event_line, kept_counts, kept_scaling, scale_events


def note(deployments: dict[str, Any]) -> dict[str, Any]:
    return {"checks": {"scaling": {"version": 1, "deployments": deployments}}}


def event(at: float, before: int, after: int) -> dict[str, Any]:
    signals = {"capacity_rps": None, "waiting": 0, "kv_usage": None, "serving": 2, "firing": []}
    return {"at": at, "from": before, "to": after, "reason": "why", "arrival_rps": 12.5, **signals}


@pytest.mark.parametrize(
    ("checks", "counts"),
    [
        (None, {}),
        ({"rollout": {}}, {}),
        ({"scaling": "garbled"}, {}),
        (note({"a/b/c": {"count": 4}})["checks"], {("a", "b", "c"): 4}),
        (note({"a/b/c": {"count": None}, "a/b": {"count": 2}})["checks"], {}),
        (note({"a/b/c": {"count": True}, "x/y/z": {"count": 1}})["checks"], {("x", "y", "z"): 1}),
    ],
    ids=["no-checks", "no-scaling", "garbled", "one", "undecided-or-bad-key", "a-bool"],
)
def test_the_counts_a_bot_keeps(checks: dict[str, Any] | None, counts: dict[Any, int]) -> None:
    assert kept_counts(checks) == counts


def test_the_newest_decision_of_each_deployment_wins() -> None:
    old = note({"a/b/c": {"decided_at": 10.0, "reason": "old"}})
    new = note({"a/b/c": {"decided_at": 20.0, "reason": "new"}})
    assert kept_scaling([new, None, {"error": "x"}, old])["a/b/c"]["reason"] == "new"


def test_events_of_every_note_once_oldest_first() -> None:
    """A bot writes the same checks into each fleet's note it holds: each event once."""
    one = note({"a/b/c": {"events": [event(30.0, 2, 3), event(10.0, 1, 2)]}})
    other = note(
        {"a/b/c": {"events": [event(10.0, 1, 2)]}, "a/b/d": {"events": [event(20.0, 1, 2), "x"]}}
    )
    found = scale_events([one, other, None])
    assert [(e["deployment"], e["at"], e["to"]) for e in found] == [
        ("a/b/c", 10.0, 2),
        ("a/b/d", 20.0, 2),
        ("a/b/c", 30.0, 3),
    ]
    assert event_line(found[0]) == (
        "1970-01-01 00:00:10Z  a/b/c: 1 → 2: why (arrival 12.5 req/s, waiting 0, 2 serving)"
    )
