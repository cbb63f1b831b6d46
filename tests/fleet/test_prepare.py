"""Following prepare jobs stops when asked: a job that never finishes (the agent's `pause_at`
hook holds it before pip) does not hold the bot — neither when `stopping` says stop nor when
the caller is interrupted (Ctrl-C, or SIGTERM turned into it) — and the job goes on on its
host, where the next `prepare` of the same payload joins it."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.engines.runtime import Need
from reconciler.errors import DenvError
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.prepare import JobState, prepare_hosts, prepare_payload
from reconciler.fleet.transport import LocalTransport

FIRST = Need(kind="venv", name="six-first", packages=("six==1.16.0",))
SECOND = Need(kind="venv", name="six-second", packages=("six==1.16.0",))


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentClient]:
    client = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": str(tmp_path / "home")}))
    yield client
    for job in (tmp_path / "home" / "jobs").glob("*.json"):  # the paused jobs wait forever
        state: dict[str, Any] = client.prepare({"id": job.stem}, 0)
        if state["state"] == "running":
            os.kill(state["pid"], signal.SIGKILL)


def paused(need: Need, host: str) -> dict[str, Any]:
    return prepare_payload([need], None, host, pause_at="pip")


def test_stopping_ends_the_follow_and_asks_no_other_host(agent: AgentClient) -> None:
    payloads = {"a": paused(FIRST, "a"), "b": paused(SECOND, "b")}
    seen: list[tuple[str, str]] = []

    def progress(host: str, state: JobState) -> None:
        seen.append((host, state.step))

    def stopping() -> bool:  # SIGTERM came once the first job is stuck
        return ("a", "paused at pip") in seen

    done, errors = prepare_hosts(
        {"a": ("a", agent.prepare), "b": ("b", agent.prepare)},
        payloads,
        parallel=1,
        progress=progress,
        stopping=stopping,
    )
    assert (done, errors) == ({}, {})  # neither done nor failed: not followed to the end
    assert {host for host, _ in seen} == {"a"}  # b was never asked: no job started for it
    again = JobState.model_validate(
        agent.prepare(payloads["a"], 0)
    )  # the job went on: the next prepare joins it
    assert (again.state, again.step) == ("running", "paused at pip")


def test_an_interrupted_caller_is_not_held_by_the_jobs_it_follows(agent: AgentClient) -> None:
    payloads = {"a": paused(FIRST, "a")}
    interrupted: list[str] = []
    polls_after: list[str] = []

    def progress(host: str, state: JobState) -> None:
        if interrupted:
            polls_after.append(state.step)
            if len(polls_after) == 5:  # a follow that ignores the interrupt: end it here
                raise DenvError("still followed after the interrupt")
        elif state.step == "paused at pip":
            interrupted.append(host)  # Ctrl-C, or SIGTERM as `denv bench run` turns it
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        prepare_hosts({"a": ("a", agent.prepare)}, payloads, parallel=1, progress=progress)
    assert interrupted == ["a"]
    # the poll under way, and one begun before the caller's stop was seen; not one more
    assert len(polls_after) <= 2
    state = agent.prepare(payloads["a"], 0)
    assert state["state"] == "running"
