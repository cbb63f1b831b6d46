"""Lease epochs and the agent's fences: each taking of a lease gives a greater epoch; a call
that carries an epoch older than one its fleet's bot has shown the host is refused (the bot
lost the lease since), whatever it asks; a fence record that cannot be read refuses too, until
`repair` moves it aside."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.fleet.hostagent import AgentClient, Fenced, RecordUnreadable

LEASE = "reconciler"


def fenced(agent: AgentClient, token: str | None) -> AgentClient:
    agent.fence = token
    return agent


def test_each_taking_gives_a_greater_epoch_and_a_renewal_keeps_it(agent: AgentClient) -> None:
    first = agent.lease(LEASE, "bot-a/1", 60)
    assert first.held and first.epoch is not None
    assert agent.lease(LEASE, "bot-a/1", 60).epoch == first.epoch  # renewed
    agent.lease(LEASE, "bot-a/1", 0, release=True)
    second = agent.lease(LEASE, "bot-b/2", 60)
    assert second.held and second.epoch is not None and second.epoch > first.epoch


def test_a_call_with_an_older_epoch_is_refused_and_others_fleets_are_their_own(
    agent: AgentClient,
) -> None:
    old = agent.lease(LEASE, "bot-a/1", 60).epoch
    agent.lease(LEASE, "bot-a/1", 0, release=True)
    new = agent.lease(LEASE, "bot-b/2", 60).epoch
    assert fenced(agent, f"lab:{old}").units() == []  # nothing newer seen yet: kept
    assert fenced(agent, f"lab:{new}").units() == []  # the new holder shows its epoch
    with pytest.raises(Fenced, match=rf"fenced: fleet lab's lease epoch {old} is older") as seen:
        fenced(agent, f"lab:{old}").launch({"id": "x", "argv": ["true"]})
    assert seen.value.fleet == "lab"
    with pytest.raises(Fenced):
        fenced(agent, f"lab:{old}").units()  # reads too
    assert fenced(agent, f"lab:{new}").units() == []
    assert fenced(agent, "other:1").units() == []  # another fleet's epochs are its own
    # the lease's own calls and an operator's repair are not fenced
    assert fenced(agent, f"lab:{old}").lease(LEASE, "bot-b/2", 60).held
    assert fenced(agent, f"lab:{old}").repair().repaired == ()
    agent.fence = None


def test_an_unreadable_fence_record_refuses_until_repaired(
    agent: AgentClient, denv_home: Path
) -> None:
    assert fenced(agent, "lab:5").units() == []
    record = denv_home / "fences" / "lab.json"
    record.write_bytes(b"\0" * 16)
    with pytest.raises(RecordUnreadable) as seen:
        fenced(agent, "lab:9").units()
    assert seen.value.path == str(record)
    assert record.read_bytes() == b"\0" * 16  # left as it is
    [moved] = fenced(agent, None).repair().repaired
    assert (moved.record, moved.path) == ("fence", str(record))
    assert fenced(agent, "lab:1").units() == []  # the next epoch shown is the newest
    agent.fence = None
