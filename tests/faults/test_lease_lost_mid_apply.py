"""A bot that loses a fleet's lease while it applies (another bot took it over: this one's
renewals stalled past the lease's time) stops acting on that fleet at its next action, not at
the end of the pass: nothing more is started there, and the pass says why."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.reconcile.snapshot import LEASE
from tests.faults.orphans import alive, empty_lab, put_release
from tests.fleet.conftest import wait_for
from tests.labs.elastic_local import ElasticLab
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path: Path) -> Iterator[ElasticLab]:
    found = None
    for found in empty_lab(git_repo, tmp_path):  # its units are stopped when the loop ends
        yield found
    assert found is not None
    found.agent().lease(LEASE, "other-bot/1", 0, release=True)


def stalled_bot(
    lab: ElasticLab, tmp_path: Path, ttl: str, meanwhile: Callable[[AgentClient, Path], None]
) -> tuple[int, str, str]:
    """A `--once` bot with `--lease-ttl ttl` paused at apply (stalled); the lease expires and
    another bot takes it (`other-bot/1`); `meanwhile(agent, stderr)` runs; then the bot goes
    on. Its exit code, stdout and stderr."""
    put_release(lab, "chat")
    lab.repo.commit("chat on the lab")
    marker, errors = tmp_path / "paused", tmp_path / "bot.stderr"
    env = {**lab.env, "DENV_FAULT_PAUSE_AT": f"after-prepare:{marker}"}
    argv = [sys.executable, "-m", "reconciler", "reconcile", "--once", "--lease-ttl", ttl]
    with errors.open("w") as stderr:
        bot = subprocess.Popen(
            [*argv, "--ready-timeout", "60s", "--repo", str(lab.repo.path)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        try:
            wait_for(marker.exists, timeout=120, what="the bot to reach apply")
            agent = lab.agent()
            agent.lease(LEASE, f"{socket.gethostname()}/{bot.pid}", 0, release=True)
            meanwhile(agent, errors)
            marker.unlink()
            out, _ = bot.communicate(timeout=120)
        finally:
            if bot.poll() is None:
                bot.kill()
    return bot.returncode, out, errors.read_text()


def test_a_lease_lost_mid_apply_stops_the_pass_on_that_fleet(
    lab: ElasticLab, tmp_path: Path
) -> None:
    def taken(agent: AgentClient, errors: Path) -> None:
        assert agent.lease(LEASE, "other-bot/1", 600).held
        wait_for(
            lambda: "its lease went to other-bot/1" in errors.read_text(),
            timeout=60,
            what="the bot's renewal to find the lease taken",
        )

    code, out, _ = stalled_bot(lab, tmp_path, "3s", taken)
    assert code == 1, out
    assert "fleet lab: its lease went to other-bot/1 during the pass" in out, out
    assert alive(lab, "chat") == []  # nothing started once the lease was another bot's


def test_a_bot_that_has_not_noticed_is_refused_by_the_agent_at_its_next_call(
    lab: ElasticLab, tmp_path: Path
) -> None:
    """The same, with the stalled bot's renewal not due for minutes (a 10-minute lease): it
    cannot know. The bot that took the lease shows the host its epoch; the stalled bot's next
    call carries its older one, the agent refuses it, and the pass stops on that fleet."""

    def taken(agent: AgentClient, errors: Path) -> None:
        found = agent.lease(LEASE, "other-bot/1", 600)
        assert found.held and found.epoch is not None
        agent.fence = f"lab:{found.epoch}"  # the other bot's first call to the host
        agent.units()

    code, out, errors = stalled_bot(lab, tmp_path, "10m", taken)
    said = out + errors
    assert code == 1, said
    assert "fenced: fleet lab's lease epoch" in out, said
    assert "its lease went to" not in said  # the renewal was not what stopped it
    assert alive(lab, "chat") == []  # nothing started once the lease was another bot's
