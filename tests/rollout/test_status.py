"""A stage's state on one fleet (rollout/status.py's `fleet_state`): the one word `denv status`
and the UI's pages show."""

from __future__ import annotations

import pytest

from reconciler.rollout.status import Unrecorded, fleet_state


@pytest.mark.parametrize(
    ("words", "drift", "bot_ran", "expected"),
    [
        (Unrecorded.WAITING.value, "start 3", False, "waiting for the bot"),
        (Unrecorded.WAITING.value, "start 3", True, "deploying (start 3)"),
        (Unrecorded.WAITING.value, "replace 1, stop 1", True, "deploying (replace 1, stop 1)"),
        (Unrecorded.WAITING.value, "stop 1", True, "waiting for the bot"),
        (Unrecorded.WAITING.value, "", True, "waiting for the bot"),
        (Unrecorded.WAITING.value, None, True, "waiting for the bot"),  # unreachable
        ("baking 12s/30s", "start 1", True, "baking 12s/30s"),
        (Unrecorded.NOT_DEPLOYED.value, "start 3", True, "not deployed"),
    ],
    ids=[
        "no-bot-yet",
        "bot-pass-starting",
        "bot-pass-replacing",
        "only-stops",
        "no-drift",
        "drift-unknown",
        "recorded",
        "no-pin",
    ],
)
def test_a_stage_deploys_on_a_fleet_only_where_a_bot_runs(
    words: str, drift: str | None, bot_ran: bool, expected: str
) -> None:
    assert fleet_state(words, drift, bot_ran) == expected
